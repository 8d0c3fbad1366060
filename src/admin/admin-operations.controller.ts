import {
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
import { HealthService } from '../health/health.service.js';
import { InstancesAdminRepository } from '../instances/instances-admin.repository.js';
import { InstancesConfig } from '../instances/instances.config.js';
import { InstancesService } from '../instances/instances.service.js';
import { JanitorConfig } from '../janitor/janitor.config.js';
import { MetricsService } from '../metrics/metrics.service.js';
import { QuotasConfig } from '../quotas/quotas.config.js';
import { SessionsAdminRepository } from '../sessions/sessions-admin.repository.js';
import { TasksAdminRepository } from '../tasks/store/tasks-admin.repository.js';
import { TasksConfig } from '../tasks/tasks.config.js';
import { AdminActions } from './admin-actions.service.js';
import { AdminCsrf } from './admin-csrf.js';
import { AdminExceptionFilter } from './admin-exception.filter.js';
import { encodePosition, parseSessionQuery, queryString } from './admin-filters.js';
import { flashOf } from './admin-flash.js';
import { CONSOLE_LIMITS } from './admin-limits.js';
import { samplesOf } from './admin-metrics.js';
import { operatorLabel, operatorOf } from './admin-page.js';
import { AdminViews } from './admin-views.js';
import { AdminGuard } from './admin.guard.js';

const SESSION_PAGE_SIZE = CONSOLE_LIMITS.pageSize;
const SESSION_ID = /^[\x21-\x7e]{1,128}$/;
/** The janitor treats an instance as gone after this many missed heartbeats (janitor.service.ts). */
const STALE_HEARTBEATS = 3;

/** Each quota of mcp_quota_rejections_total and the setting that bounds it. */
const QUOTA_SETTINGS: Record<string, keyof QuotasConfig> = {
  address_rate: 'RATE_LIMIT_ADDRESS_RPS',
  principal_rate: 'RATE_LIMIT_PRINCIPAL_RPS',
  sessions: 'QUOTA_SESSIONS_PER_PRINCIPAL',
  streams: 'QUOTA_STREAMS_PER_PRINCIPAL',
  in_flight: 'QUOTA_IN_FLIGHT_PER_PRINCIPAL',
  result_waiters: 'QUOTA_RESULT_WAITERS_PER_PRINCIPAL',
  subscriptions: 'QUOTA_SUBSCRIPTIONS_PER_SESSION',
  task_params_bytes: 'QUOTA_TASK_PARAMS_BYTES',
  task_result_bytes: 'QUOTA_TASK_RESULT_BYTES',
  task_input_bytes: 'QUOTA_TASK_INPUT_BYTES',
  task_checkpoint_bytes: 'QUOTA_TASK_CHECKPOINT_BYTES',
  session_client_bytes: 'QUOTA_SESSION_CLIENT_BYTES',
  client_response_bytes: 'QUOTA_CLIENT_RESPONSE_BYTES_PER_SESSION',
  retained_tasks: 'QUOTA_RETAINED_TASKS_PER_OWNER',
};

/** The console's other pages: sessions (and ending one), instances, the janitor, quotas. */
@Controller('admin')
@UseGuards(AdminGuard)
@UseFilters(AdminExceptionFilter)
export class AdminOperationsController {
  constructor(
    private readonly sessions: SessionsAdminRepository,
    private readonly instances: InstancesAdminRepository,
    private readonly tasks: TasksAdminRepository,
    private readonly self: InstancesService,
    private readonly health: HealthService,
    private readonly metrics: MetricsService,
    private readonly actions: AdminActions,
    private readonly views: AdminViews,
    private readonly csrf: AdminCsrf,
    private readonly instancesConfig: InstancesConfig,
    private readonly janitorConfig: JanitorConfig,
    private readonly tasksConfig: TasksConfig,
    private readonly quotasConfig: QuotasConfig,
  ) {}

  @Get('sessions')
  async sessionList(
    @Req() req: Request,
    @Query() q: Record<string, unknown>,
    @Res() res: Response,
  ): Promise<void> {
    const { owner, after } = parseSessionQuery(q);
    const [rows, streams] = await Promise.all([
      this.sessions.consoleSessions(owner, after, SESSION_PAGE_SIZE),
      samplesOf(this.metrics.registry, 'mcp_sse_streams_active'),
    ]);
    const page = rows.slice(0, SESSION_PAGE_SIZE);
    const last = page[page.length - 1];
    const form = { owner: owner ?? '' };
    const operator = operatorOf(req);
    this.views.send(res, 'sessions', {
      operator: operatorLabel(operator),
      flash: flashOf(q.flash),
      csrf: this.csrf.tokenFor(operator.id),
      filter: form,
      sessions: page,
      openStreams: streams.reduce((n, s) => n + s.value, 0),
      nextPage:
        rows.length > SESSION_PAGE_SIZE && last
          ? `/admin/sessions${queryString(form, { after: encodePosition(last.lastSeenAt, last.id) })}`
          : undefined,
      firstPage: after ? `/admin/sessions${queryString(form)}` : undefined,
    });
  }

  @Post('sessions/:id/end')
  async endSession(@Req() req: Request, @Param('id') id: string, @Res() res: Response): Promise<void> {
    if (!SESSION_ID.test(id)) throw new NotFoundException(`No session ${id}.`);
    const outcome = await this.actions.endSession(operatorOf(req), id);
    if (outcome.done === 'not-found') throw new NotFoundException(`No session ${id}.`);
    res.redirect(303, `/admin/sessions?flash=${outcome.done}`);
  }

  @Get('instances')
  async instanceList(@Req() req: Request, @Res() res: Response): Promise<void> {
    const rows = await this.instances.consoleInstances(
      CONSOLE_LIMITS.stoppedShownMs,
      CONSOLE_LIMITS.instances,
    );
    const [leases, readiness] = await Promise.all([
      this.tasks.consoleLeasesHeld(rows.map((r) => r.id)),
      this.health.readiness(),
    ]);
    const silentAfterMs = STALE_HEARTBEATS * this.instancesConfig.INSTANCE_HEARTBEAT_MS;
    const now = Date.now();
    this.views.send(res, 'instances', {
      operator: operatorLabel(operatorOf(req)),
      self: {
        id: this.self.instanceId,
        role: this.instancesConfig.INSTANCE_ROLE,
        ready: readiness.status === 'ok',
        down: Object.fromEntries(
          Object.entries(readiness.checks).flatMap(([name, c]) =>
            c.status === 'down' ? [[name, c.reason]] : [],
          ),
        ),
      },
      silentAfter: `${silentAfterMs / 1000} s`,
      instances: rows.map((r) => ({
        ...r,
        self: r.id === this.self.instanceId,
        state: r.stoppedAt ? 'stopped' : now - r.heartbeatAt.getTime() > silentAfterMs ? 'silent' : 'alive',
        leases: leases.get(r.id) ?? 0,
      })),
    });
  }

  @Get('janitor')
  async janitor(@Req() req: Request, @Res() res: Response): Promise<void> {
    const registry = this.metrics.registry;
    const [backlog, lag, last, runs, rows] = await Promise.all([
      this.tasks.consoleJanitorBacklog(this.tasksConfig.TASK_EXPIRED_GRACE_MS, CONSOLE_LIMITS.countBound),
      samplesOf(registry, 'mcp_janitor_lag_seconds'),
      samplesOf(registry, 'mcp_janitor_last_success_timestamp_seconds'),
      samplesOf(registry, 'mcp_janitor_runs_total'),
      samplesOf(registry, 'mcp_janitor_rows_total'),
    ]);
    const lagOf = (step: string): string => {
      const s = lag.find((l) => l.labels.step === step);
      return s ? s.value.toFixed(1) : '–';
    };
    const lastRun = last[0]?.value ? new Date(last[0].value * 1000) : undefined;
    this.views.send(res, 'janitor', {
      operator: operatorLabel(operatorOf(req)),
      enabled: this.janitorConfig.JANITOR_ENABLED,
      intervalMs: this.janitorConfig.JANITOR_INTERVAL_MS,
      batchSize: this.janitorConfig.JANITOR_BATCH_SIZE,
      dutyPercent: this.janitorConfig.JANITOR_DUTY_PERCENT,
      lastRun,
      lag: { expire: lagOf('expire'), delete: lagOf('delete') },
      backlog,
      counters: [
        ...runs.map((s) => ({ name: `runs ${String(s.labels.result)}`, value: s.value })),
        ...rows.map((s) => ({ name: `rows ${String(s.labels.action)}`, value: s.value })),
      ],
    });
  }

  @Get('quotas')
  async quotas(@Req() req: Request, @Res() res: Response): Promise<void> {
    const samples = await samplesOf(this.metrics.registry, 'mcp_quota_rejections_total');
    const quotas = samples
      .map((s) => {
        const name = String(s.labels.quota);
        const setting = QUOTA_SETTINGS[name];
        return {
          name,
          refusals: s.value,
          setting: setting ?? '–',
          limit: setting ? String(this.quotasConfig[setting]) : '–',
        };
      })
      // The quotas being hit first, then by name.
      .sort((a, b) => b.refusals - a.refusals || a.name.localeCompare(b.name));
    this.views.send(res, 'quotas', { operator: operatorLabel(operatorOf(req)), quotas });
  }
}
