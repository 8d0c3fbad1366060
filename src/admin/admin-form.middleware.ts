import { Injectable, type NestMiddleware } from '@nestjs/common';
import express, { type NextFunction, type Request, type Response } from 'express';
import { setAdminHeaders } from './admin-views.js';

/** A console form holds a token and nothing else: anything bigger is not one of ours. */
const FORM_LIMIT = '4kb';

/**
 * Runs before the guard on every /admin route: the security headers (so refusals carry them too) and the
 * parser of the console's urlencoded forms (the app parses only JSON). A form it cannot read is refused
 * here as plain text, before any authentication.
 */
@Injectable()
export class AdminFormMiddleware implements NestMiddleware {
  private readonly parse = express.urlencoded({ extended: false, limit: FORM_LIMIT, parameterLimit: 10 });

  use(req: Request, res: Response, next: NextFunction): void {
    setAdminHeaders(res);
    this.parse(req, res, (err?: unknown) => {
      if (!err) return next();
      const status = (err as { type?: string }).type === 'entity.too.large' ? 413 : 400;
      res
        .status(status)
        .type('text/plain')
        .send(status === 413 ? 'Form too large' : 'Unreadable form');
    });
  }
}
