import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { DataSource, type Repository } from 'typeorm';
import { currentAuditContext } from '../audit/audit-context.js';
import { AuditTrail } from '../audit/audit-trail.service.js';
import type { AuditEvent } from '../audit/audit.types.js';
import { SESSION_CREATION_LOCK_PREFIX } from '../database/advisory-locks.js';
import { runPrepared, type PreparedStatement } from '../database/prepared-query.js';
import { inTransaction } from '../database/sql-transaction.js';
import { McpSession } from './session.entity.js';
import { rowToSession, type SessionRow } from './session-row.mapper.js';

/**
 * Every legacy request resolves its session, so this read is prepared once per connection and maps its
 * row by hand. Idleness is judged by the database clock, like every other expiry.
 */
const FIND_LIVE: PreparedStatement = {
  name: 'mcp_session_find_live',
  text: `SELECT id, principal_id, protocol_version, client_capabilities, client_info, log_level,
                resource_subscriptions, created_at, last_seen_at, ended_at,
                last_seen_at < now() - make_interval(secs => $4::float8 / 1000) AS touch_due
           FROM mcp_session
          WHERE id = $1 AND principal_id = $2 AND ended_at IS NULL
            AND last_seen_at >= now() - make_interval(secs => $3::float8 / 1000)`,
};

/** Every legacy task run reads its session's capabilities: prepared and mapped by hand, like FIND_LIVE. */
const FIND_BY_ID: PreparedStatement = {
  name: 'mcp_session_find_by_id',
  text: `SELECT id, principal_id, protocol_version, client_capabilities, client_info, log_level,
                resource_subscriptions, created_at, last_seen_at, ended_at
           FROM mcp_session WHERE id = $1`,
};

/** Ends one session (BEGIN goes in the same round trip); returns its owner when it was live. */
const END_ONE: PreparedStatement = {
  name: 'mcp_session_end',
  text: `UPDATE mcp_session SET ended_at = $2::timestamptz
          WHERE id = $1 AND ended_at IS NULL
          RETURNING principal_id`,
};

/** Ends every session idle since before $1; returns which, for their audit rows. */
const END_IDLE: PreparedStatement = {
  name: 'mcp_session_end_idle',
  text: `UPDATE mcp_session SET ended_at = $2::timestamptz
          WHERE ended_at IS NULL AND last_seen_at < $1::timestamptz
          RETURNING id, principal_id`,
};

/**
 * Why a session ended, in its `session.ended` audit row: the client's DELETE, the idle sweep, an operator
 * (CLI or console). A credential that stops holding closes the session's streams, not the session.
 */
export type SessionEndReason = 'client' | 'idle' | 'operator';

/** What resources/subscribe did: added the URI, found it held, found the quota full, or no session row. */
export interface SubscriptionChange {
  outcome: 'added' | 'held' | 'full' | 'gone';
  /** Subscriptions the session holds afterwards. */
  held: number;
}

/**
 * A session's end as the audit trail records it. Its principal is whoever ended it when that is someone (the
 * owner's DELETE, an operator), else the owner (the idle sweep), as for tasks; detail.owner names the owner
 * when the principal is someone else.
 */
function endedEvent(sessionId: string, owner: string, reason: SessionEndReason): AuditEvent {
  const principal = currentAuditContext().actor.principal ?? owner;
  return {
    kind: 'session.ended',
    principal,
    sessionId,
    era: 'legacy',
    detail: principal === owner ? { reason } : { owner, reason },
  };
}

interface LiveSessionRow extends SessionRow {
  touch_due: boolean;
}

@Injectable()
export class SessionsRepository {
  constructor(
    @InjectRepository(McpSession) private readonly repo: Repository<McpSession>,
    private readonly dataSource: DataSource,
    private readonly audit: AuditTrail,
  ) {}

  async create(
    row: Pick<McpSession, 'id' | 'principalId' | 'protocolVersion' | 'clientCapabilities' | 'clientInfo'>,
  ): Promise<McpSession> {
    const now = new Date();
    const session = this.repo.create({
      ...row,
      logLevel: null,
      resourceSubscriptions: [],
      createdAt: now,
      lastSeenAt: now,
      endedAt: null,
    });
    await this.repo.save(session);
    return session;
  }

  /**
   * Creates the session unless its principal already holds `maxLive` live ones (not ended, seen after
   * `idleCutoff`); then returns null. Exact across instances: creations for one principal are serialized
   * by a transaction-scoped advisory lock on the principal id. Its `session.opened` audit row commits with it.
   */
  async createWithin(
    row: Pick<McpSession, 'id' | 'principalId' | 'protocolVersion' | 'clientCapabilities' | 'clientInfo'>,
    maxLive: number,
    idleCutoff: Date,
  ): Promise<McpSession | null> {
    return this.repo.manager.transaction(async (m) => {
      await m.query(`SELECT pg_advisory_xact_lock(hashtext('${SESSION_CREATION_LOCK_PREFIX}' || $1))`, [
        row.principalId,
      ]);
      const [{ n }] = await m.query<{ n: string }[]>(
        `SELECT count(*) AS n FROM mcp_session
          WHERE principal_id = $1 AND ended_at IS NULL AND last_seen_at >= $2`,
        [row.principalId, idleCutoff],
      );
      if (Number(n) >= maxLive) return null;
      const now = new Date();
      const session = m.create(McpSession, {
        ...row,
        logLevel: null,
        resourceSubscriptions: [],
        createdAt: now,
        lastSeenAt: now,
        endedAt: null,
      });
      await m.save(session);
      await this.audit.record(m, {
        kind: 'session.opened',
        sessionId: session.id,
        era: 'legacy',
        detail: {
          protocolVersion: session.protocolVersion,
          ...(typeof row.clientInfo?.name === 'string' && { clientName: row.clientInfo.name }),
        },
      });
      return session;
    });
  }

  /**
   * The session if it exists, belongs to the principal, has not ended and was seen within `idleTtlMs`
   * (database clock); `touchDue` says its last_seen_at is older than `touchAfterMs` and wants refreshing.
   */
  async findLive(
    id: string,
    principalId: string,
    idleTtlMs: number,
    touchAfterMs: number,
  ): Promise<{ session: McpSession; touchDue: boolean } | null> {
    const [row] = await runPrepared<LiveSessionRow>(this.dataSource, FIND_LIVE, [
      id,
      principalId,
      idleTtlMs,
      touchAfterMs,
    ]);
    if (!row) return null;
    return { session: rowToSession(row), touchDue: row.touch_due };
  }

  async findById(id: string): Promise<McpSession | null> {
    const [row] = await runPrepared<SessionRow>(this.dataSource, FIND_BY_ID, [id]);
    return row ? rowToSession(row) : null;
  }

  /** Live sessions subscribed to a resource URI (resources/subscribe). */
  async findSubscribed(uri: string): Promise<string[]> {
    const rows = await this.repo
      .createQueryBuilder('s')
      .select('s.id', 'id')
      .where('s.ended_at IS NULL AND s.resource_subscriptions @> :uri::jsonb', { uri: JSON.stringify([uri]) })
      .getRawMany<{ id: string }>();
    return rows.map((r) => r.id);
  }

  /** Refreshes last_seen_at, at most once per `minIntervalMs`, so busy sessions do not write on every request. */
  async touch(id: string, minIntervalMs: number): Promise<void> {
    await this.repo
      .createQueryBuilder()
      .update()
      .set({ lastSeenAt: () => 'now()' })
      .where('id = :id AND last_seen_at < now() - make_interval(secs => :secs)', {
        id,
        secs: minIntervalMs / 1000,
      })
      .execute();
  }

  /**
   * Ends the session if it is live, with its `session.ended` audit row in the same transaction; false when
   * it had ended already (or never existed), and then nothing is recorded.
   */
  async end(id: string, reason: SessionEndReason): Promise<boolean> {
    return inTransaction(this.dataSource, { lockTimeoutMs: 0 }, async (tx) => {
      const [row] = await tx.first<{ principal_id: string }>(END_ONE, [id, new Date().toISOString()]);
      if (!row) return false;
      await this.audit.record(tx, endedEvent(id, row.principal_id, reason));
      return true;
    });
  }

  async setLogLevel(id: string, level: string): Promise<void> {
    await this.repo.update({ id }, { logLevel: level });
  }

  /**
   * Adds `uri` to the session's subscriptions unless it holds it already or holds `max` others. One UPDATE
   * computes the new array from the row as it is when the row lock is taken (PostgreSQL re-checks a row
   * changed by a concurrent transaction), so concurrent subscribes on any instances all keep their URI.
   * When nothing was written, a second read says why; if that read sees neither (an unsubscribe came in
   * between), the UPDATE runs again.
   */
  async addSubscription(id: string, uri: string, max: number): Promise<SubscriptionChange> {
    const item = JSON.stringify([uri]);
    for (let attempt = 0; attempt < 5; attempt++) {
      const [updated] = await this.repo.query<[{ n: number }[], number]>(
        `UPDATE mcp_session SET resource_subscriptions = resource_subscriptions || $2::jsonb
          WHERE id = $1 AND NOT resource_subscriptions @> $2::jsonb
            AND jsonb_array_length(resource_subscriptions) < $3
          RETURNING jsonb_array_length(resource_subscriptions) AS n`,
        [id, item, max],
      );
      if (updated.length > 0) return { outcome: 'added', held: updated[0].n };
      const [row] = await this.repo.query<{ held: boolean; n: number }[]>(
        `SELECT resource_subscriptions @> $2::jsonb AS held, jsonb_array_length(resource_subscriptions) AS n
           FROM mcp_session WHERE id = $1`,
        [id, item],
      );
      if (!row) return { outcome: 'gone', held: 0 };
      if (row.held) return { outcome: 'held', held: row.n };
      if (row.n >= max) return { outcome: 'full', held: row.n };
    }
    throw new Error(`resources/subscribe on session ${id} kept racing with concurrent changes`);
  }

  /** Removes `uri` from the session's subscriptions in one UPDATE (jsonb `-` drops that string element). */
  async removeSubscription(id: string, uri: string): Promise<void> {
    await this.repo.query(
      `UPDATE mcp_session SET resource_subscriptions = resource_subscriptions - $2::text
        WHERE id = $1 AND resource_subscriptions @> $3::jsonb`,
      [id, uri, JSON.stringify([uri])],
    );
  }

  /** Ends sessions idle since before `cutoff`, each with its `session.ended` row; returns how many. */
  async endIdle(cutoff: Date): Promise<number> {
    return inTransaction(this.dataSource, { lockTimeoutMs: 0 }, async (tx) => {
      const ended = await tx.first<{ id: string; principal_id: string }>(END_IDLE, [
        cutoff.toISOString(),
        new Date().toISOString(),
      ]);
      for (const row of ended) await this.audit.record(tx, endedEvent(row.id, row.principal_id, 'idle'));
      return ended.length;
    });
  }

  /** Deletes sessions that ended before `cutoff` (their events go with them, see SseEventsRepository). */
  async deleteEndedBefore(cutoff: Date): Promise<string[]> {
    const old = await this.repo
      .createQueryBuilder()
      .delete()
      .where('ended_at IS NOT NULL AND ended_at < :cutoff', { cutoff })
      .returning('id')
      .execute();
    return (old.raw as { id: string }[]).map((r) => r.id);
  }
}
