import {
  Catch,
  HttpException,
  Injectable,
  Logger,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import type { RequestWithPrincipal } from '../principals/principal.js';
import { operatorLabel } from './admin-page.js';
import { AdminViews } from './admin-views.js';

const HEADINGS: Record<number, string> = {
  400: 'Bad request',
  401: 'Sign in required',
  403: 'Forbidden',
  404: 'Not found',
  413: 'Too large',
  503: 'Unavailable',
};

/**
 * The console's one error mapping: every refusal and failure of an /admin route is an HTML page with the
 * right status (the 401 keeps the challenge header the guard set). Anything that is not an HttpException is
 * logged here and shown as a bare 500 page, never with its message.
 */
@Injectable()
@Catch()
export class AdminExceptionFilter implements ExceptionFilter {
  private readonly logger = new Logger('AdminConsole');

  constructor(private readonly views: AdminViews) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const res = http.getResponse<Response>();
    const req = http.getRequest<Request & RequestWithPrincipal>();
    if (res.headersSent) {
      res.end();
      return;
    }
    let status = 500;
    let message = 'Something went wrong on the server; the log has the details.';
    if (exception instanceof HttpException) {
      status = exception.getStatus();
      const body = exception.getResponse();
      const text =
        typeof body === 'string'
          ? body
          : (body as { message?: unknown; error_description?: unknown }).message;
      message = Array.isArray(text) ? text.join('; ') : typeof text === 'string' ? text : exception.message;
    } else {
      this.logger.error(
        exception instanceof Error ? exception.message : 'unknown error',
        exception instanceof Error ? exception.stack : undefined,
      );
    }
    this.views.send(
      res,
      'error',
      {
        status,
        heading: HEADINGS[status] ?? (status >= 500 ? 'Server error' : 'Refused'),
        message,
        operator: req.principal ? operatorLabel(req.principal) : undefined,
      },
      status,
    );
  }
}
