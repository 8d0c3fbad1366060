import {
  ConflictException,
  Controller,
  Get,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  Res,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import { asActor } from '../audit/audit-context.js';
import { limitsText, QueueControl, QueueControlError } from '../tasks/sharing/queue-control.js';
import { AdminCsrf } from './admin-csrf.js';
import { AdminExceptionFilter } from './admin-exception.filter.js';
import { flashOf } from './admin-flash.js';
import { operatorLabel, operatorOf } from './admin-page.js';
import { AdminViews } from './admin-views.js';
import { AdminGuard } from './admin.guard.js';

/** What a tool name can be (McpTool's rule): anything else names no tool, and is answered 404 unread. */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;

/** The console's Queue page: each task tool's queue, and pausing or resuming it (QueueControl). */
@Controller('admin')
@UseGuards(AdminGuard)
@UseFilters(AdminExceptionFilter)
export class AdminQueueController {
  constructor(
    private readonly queue: QueueControl,
    private readonly views: AdminViews,
    private readonly csrf: AdminCsrf,
  ) {}

  @Get('queue')
  async status(
    @Req() req: Request,
    @Query() q: Record<string, unknown>,
    @Res() res: Response,
  ): Promise<void> {
    const status = await this.queue.status();
    const operator = operatorOf(req);
    this.views.send(res, 'queue', {
      operator: operatorLabel(operator),
      flash: flashOf(q.flash),
      csrf: this.csrf.tokenFor(operator.id),
      tools: status.tools.map((t) => ({ ...t, limitsText: limitsText(t) })),
      fairnessKeys: status.fairnessKeys.map((k) => ({ ...k, label: k.key === '' ? '(shared)' : k.key })),
    });
  }

  @Post('queue/:tool/pause')
  pause(@Req() req: Request, @Param('tool') tool: string, @Res() res: Response): Promise<void> {
    return this.change(req, tool, true, res);
  }

  @Post('queue/:tool/resume')
  resume(@Req() req: Request, @Param('tool') tool: string, @Res() res: Response): Promise<void> {
    return this.change(req, tool, false, res);
  }

  private async change(req: Request, tool: string, pause: boolean, res: Response): Promise<void> {
    if (!TOOL_NAME.test(tool)) throw new NotFoundException('No such tool.');
    const operator = operatorOf(req);
    let change;
    try {
      // Recorded as the operator's action (actor operator, via console) in the transaction that makes it.
      change = await asActor({ kind: 'operator', principal: operator.id, via: 'console' }, () =>
        pause ? this.queue.pause(tool, operator.id) : this.queue.resume(tool, operator.id),
      );
    } catch (err) {
      if (!(err instanceof QueueControlError)) throw err;
      if (err.reason === 'unknown-tool') throw new NotFoundException(err.message);
      throw new ConflictException(err.message);
    }
    const code = pause
      ? change.changed
        ? 'paused'
        : 'already-paused'
      : change.changed
        ? 'resumed'
        : 'already-resumed';
    res.redirect(303, `/admin/queue?flash=${code}`);
  }
}
