import { randomBytes } from 'node:crypto';
import {
  BadRequestException,
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
import { AuditAdminRepository } from '../audit/audit-admin.repository.js';
import { AuditTrail } from '../audit/audit-trail.service.js';
import { TASK_STATUSES, isLive, isTerminal } from '../tasks/task-state.js';
import { isWellFormedTaskId } from '../tasks/task-ids.js';
import { TasksAdminRepository } from '../tasks/store/tasks-admin.repository.js';
import { AdminActions, type ActionOutcome } from './admin-actions.service.js';
import { AdminCsrf } from './admin-csrf.js';
import { AdminExceptionFilter } from './admin-exception.filter.js';
import { encodePosition, parseTaskQuery, queryString } from './admin-filters.js';
import { flashOf } from './admin-flash.js';
import { CONSOLE_LIMITS } from './admin-limits.js';
import { operatorLabel, operatorOf } from './admin-page.js';
import { AdminViews } from './admin-views.js';
import { AdminGuard } from './admin.guard.js';

const TASK_PAGE_SIZE = CONSOLE_LIMITS.pageSize;
const COUNT_BOUND = CONSOLE_LIMITS.countBound;
const TIMELINE_LIMIT = CONSOLE_LIMITS.timeline;
const CHECKPOINT_PREVIEW_CHARS = CONSOLE_LIMITS.checkpointPreviewChars;
/** A redrive form's submission id as the task page renders it (16 random bytes, base64url). */
const SUBMISSION = /^[A-Za-z0-9_-]{22}$/;

/** The tasks pages of the console: the list across every owner, a task's page, cancel and redrive. */
@Controller('admin')
@UseGuards(AdminGuard)
@UseFilters(AdminExceptionFilter)
export class AdminTasksController {
  constructor(
    private readonly tasks: TasksAdminRepository,
    private readonly audit: AuditAdminRepository,
    private readonly trail: AuditTrail,
    private readonly actions: AdminActions,
    private readonly views: AdminViews,
    private readonly csrf: AdminCsrf,
  ) {}

  @Get()
  root(@Res() res: Response): void {
    res.redirect(302, '/admin/tasks');
  }

  @Get('tasks')
  async list(@Req() req: Request, @Query() q: Record<string, unknown>, @Res() res: Response): Promise<void> {
    const { filter, form, after } = parseTaskQuery(q);
    const [rows, counts] = await Promise.all([
      this.tasks.consoleTasks(filter, after, TASK_PAGE_SIZE),
      this.tasks.consoleStatusCounts(COUNT_BOUND),
    ]);
    const page = rows.slice(0, TASK_PAGE_SIZE);
    const last = page[page.length - 1];
    const formFields = { ...form };
    this.views.send(res, 'tasks', {
      operator: operatorLabel(operatorOf(req)),
      flash: flashOf(q.flash),
      counts,
      countBound: COUNT_BOUND,
      statuses: TASK_STATUSES,
      filter: form,
      tasks: page,
      nextPage:
        rows.length > TASK_PAGE_SIZE && last
          ? `/admin/tasks${queryString(formFields, { after: encodePosition(last.createdAt, last.id) })}`
          : undefined,
      firstPage: after ? `/admin/tasks${queryString(formFields)}` : undefined,
    });
  }

  /** The counts alone, for the page's script to refresh them in place. */
  @Get('tasks/counts')
  async counts(@Res() res: Response): Promise<void> {
    const counts = await this.tasks.consoleStatusCounts(COUNT_BOUND);
    res.setHeader('Cache-Control', 'no-store');
    res.json({ counts });
  }

  @Get('tasks/:id')
  async show(
    @Req() req: Request,
    @Param('id') id: string,
    @Query('flash') flash: unknown,
    @Res() res: Response,
  ): Promise<void> {
    if (!isWellFormedTaskId(id)) throw new NotFoundException('No such task.');
    const task = await this.tasks.consoleTask(id, CHECKPOINT_PREVIEW_CHARS);
    if (!task) throw new NotFoundException(`No task ${id} (never created, or deleted after its retention).`);
    const [timeline, redrivenAs] = await Promise.all([
      this.audit.taskTimeline(id, TIMELINE_LIMIT + 1),
      this.tasks.consoleRedrivenAs(id, CONSOLE_LIMITS.redrivenAs),
    ]);
    const operator = operatorOf(req);
    this.views.send(res, 'task', {
      operator: operatorLabel(operator),
      flash: flashOf(flash),
      csrf: this.csrf.tokenFor(operator.id),
      // Names this rendering of the redrive form: posting it twice (a double click, a resent request)
      // redrives once (AdminActions.redriveTask).
      submission: randomBytes(16).toString('base64url'),
      task,
      live: isLive(task.status),
      finished: isTerminal(task.status),
      // traceparent: version-traceid-spanid-flags.
      traceId: task.traceparent?.split('-')[1] ?? null,
      checkpointTruncated: (task.checkpointPreview?.length ?? 0) >= CHECKPOINT_PREVIEW_CHARS,
      previewChars: CHECKPOINT_PREVIEW_CHARS,
      redrivenAs,
      timeline: timeline.slice(0, TIMELINE_LIMIT),
      timelineTruncated: timeline.length > TIMELINE_LIMIT,
      timelineLimit: TIMELINE_LIMIT,
      auditOff: !this.trail.enabled,
    });
  }

  @Post('tasks/:id/cancel')
  async cancel(@Req() req: Request, @Param('id') id: string, @Res() res: Response): Promise<void> {
    if (!isWellFormedTaskId(id)) throw new NotFoundException('No such task.');
    this.redirect(res, id, await this.actions.cancelTask(operatorOf(req), id));
  }

  @Post('tasks/:id/redrive')
  async redrive(@Req() req: Request, @Param('id') id: string, @Res() res: Response): Promise<void> {
    if (!isWellFormedTaskId(id)) throw new NotFoundException('No such task.');
    const submission = (req.body as Record<string, unknown> | undefined)?.submission;
    if (typeof submission !== 'string' || !SUBMISSION.test(submission)) {
      throw new BadRequestException(
        'This form has no valid submission id: reload the task page and submit again.',
      );
    }
    this.redirect(res, id, await this.actions.redriveTask(operatorOf(req), id, submission));
  }

  /** Post/Redirect/Get: a reload of the page the action lands on never repeats the action. */
  private redirect(res: Response, id: string, outcome: ActionOutcome): void {
    if (outcome.done === 'not-found') throw new NotFoundException(`No task ${id}.`);
    const target = outcome.done === 'redriven' ? outcome.newTaskId : id;
    res.redirect(303, `/admin/tasks/${encodeURIComponent(target)}?flash=${outcome.done}`);
  }
}
