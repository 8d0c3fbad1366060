import { All, Controller, Get, NotFoundException, Res, UseFilters, UseGuards } from '@nestjs/common';
import type { Response } from 'express';
import { AdminExceptionFilter } from './admin-exception.filter.js';
import { AdminGuard } from './admin.guard.js';
import { CONSOLE_CSS, CONSOLE_JS } from './views/assets.view.js';

/**
 * The stylesheet and the script, behind the same guard as the pages (every /admin route is), and a
 * catch-all so that an unknown /admin path is refused like the others (401/403) before it is a 404 page.
 * Registered after the page controllers, so the catch-all matches last.
 */
@Controller('admin')
@UseGuards(AdminGuard)
@UseFilters(AdminExceptionFilter)
export class AdminAssetsController {
  @Get('assets/console.css')
  css(@Res() res: Response): void {
    res.type('text/css').send(CONSOLE_CSS);
  }

  @Get('assets/console.js')
  js(@Res() res: Response): void {
    res.type('text/javascript').send(CONSOLE_JS);
  }

  @All('*path')
  unknown(): never {
    throw new NotFoundException('No such console page.');
  }
}
