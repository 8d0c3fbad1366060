import {
  Catch,
  HttpException,
  HttpStatus,
  Logger,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import type { Response } from 'express';

/**
 * The HTTP edge's one error mapping for non-MCP routes: HttpExceptions keep their status and message,
 * anything else is logged here and answered as a bare 500 without internals.
 */
@Catch()
export class AllExceptionsFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpError');

  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    if (res.headersSent) {
      res.end();
      return;
    }
    if (exception instanceof HttpException) {
      const status = exception.getStatus();
      const body = exception.getResponse();
      res
        .status(status)
        .json(
          typeof body === 'object' && body !== null ? body : { statusCode: status, message: String(body) },
        );
      return;
    }
    this.logger.error(
      exception instanceof Error ? exception.message : 'unknown error',
      exception instanceof Error ? exception.stack : undefined,
    );
    res
      .status(HttpStatus.INTERNAL_SERVER_ERROR)
      .json({ statusCode: 500, error: 'Internal Server Error', message: 'Internal server error' });
  }
}
