import net from 'node:net';

/** A COMMIT the proxy lets through and then loses the answer of (see loseCommitReply). */
interface CommitTrap {
  match: (sql: string, app: string) => boolean;
  sprung: (sql: string) => void;
}

/**
 * A TCP proxy in front of the test PostgreSQL that can misbehave like a network: refuse new connections,
 * black-hole live ones (half-open: nothing arrives, nothing is closed), cut them, or lose the answer to
 * a COMMIT that the server carried out. It reads the startup
 * message of each connection to learn its application_name, so a test can aim at one kind of connection
 * (the LISTEN connection, say) and leave the pool alone. Plain TCP only (no SSL), as the test server is.
 */
export class PgProxy {
  private readonly server: net.Server;
  private readonly conns = new Set<ProxiedConnection>();
  private refusing: ((app: string) => boolean) | undefined;
  private stallOnQuery: ((app: string) => boolean) | undefined;
  private readonly commitTraps: CommitTrap[] = [];
  private cutOnSql: { match: (app: string, sql: string) => boolean; done: (sql: string) => void } | undefined;
  /** Every connection accepted so far, by application_name (refused ones too). */
  readonly accepted: string[] = [];

  private constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {
    this.server = net.createServer((socket) => this.accept(socket));
  }

  static async start(targetUrl: string): Promise<PgProxy> {
    const u = new URL(targetUrl);
    const proxy = new PgProxy(u.hostname, Number(u.port || 5432));
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  /** `url` (same database, user and options) reached through this proxy. */
  via(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String((this.server.address() as net.AddressInfo).port);
    return u.toString();
  }

  /** New connections whose application_name matches are closed at once (until `refuse(undefined)`). */
  refuse(match: ((app: string) => boolean) | undefined): void {
    this.refusing = match;
  }

  /** Matching connections go silent at their next simple query, as if the network died under them. */
  stallAtNextQuery(match: ((app: string) => boolean) | undefined): void {
    this.stallOnQuery = match;
  }

  /**
   * The next simple query that ends in COMMIT and matches (its SQL text, the connection's application_name)
   * goes to PostgreSQL as usual, but the server's answer is held back; once the server reports the COMMIT
   * done, the connection is cut both ways. The client sees a dropped connection for a transaction that did
   * commit. Resolves with the query text when that has happened; several traps spring in order.
   */
  loseCommitReply(match: (sql: string, app: string) => boolean): Promise<string> {
    return new Promise((resolve) => this.commitTraps.push({ match, sprung: resolve }));
  }

  /** Traps set by loseCommitReply that have not sprung yet. */
  get commitTrapsArmed(): number {
    return this.commitTraps.length;
  }

  /** The trap a query springs, if any (taken off the list: each springs once). */
  private trapFor(sql: string, app: string): CommitTrap | undefined {
    if (!/\bCOMMIT\s*;?\s*$/i.test(sql)) return undefined;
    const i = this.commitTraps.findIndex((t) => t.match(sql, app));
    return i < 0 ? undefined : this.commitTraps.splice(i, 1)[0];
  }

  /**
   * Cuts the first connection, live or new, that sends a statement (simple query or Parse) for which
   * `match(application_name, sql)` holds, just before the statement reaches PostgreSQL: a fault at one exact
   * step (the NOTIFY after an append, say). Once only; resolves with the statement's text.
   */
  cutAtStatement(match: (app: string, sql: string) => boolean): Promise<string> {
    return new Promise((resolve) => {
      this.cutOnSql = {
        match,
        done: (sql) => {
          this.cutOnSql = undefined;
          resolve(sql);
        },
      };
    });
  }

  /** Black-holes the live matching connections both ways without closing them (a half-open link). */
  blackHole(match: (app: string) => boolean): number {
    let n = 0;
    for (const c of this.conns) {
      if (match(c.app)) {
        c.stalled = true;
        n++;
      }
    }
    return n;
  }

  /** Cuts the live matching connections (the client sees a reset). */
  cut(match: (app: string) => boolean): number {
    let n = 0;
    for (const c of [...this.conns]) {
      if (match(c.app)) {
        c.destroy();
        this.conns.delete(c); // at once: its close event comes later
        n++;
      }
    }
    return n;
  }

  /** Live matching connections. */
  count(match: (app: string) => boolean): number {
    return [...this.conns].filter((c) => match(c.app)).length;
  }

  /** Local ports of the proxy's connections to PostgreSQL (pg_stat_activity.client_port of A's backends). */
  upstreamPorts(): number[] {
    return [...this.conns].map((c) => c.upstreamPort).filter((p): p is number => p !== undefined);
  }

  /** Stalled connections that the client has given up on (closed its side). */
  stalledCount(match: (app: string) => boolean): number {
    return [...this.conns].filter((c) => c.stalled && match(c.app)).length;
  }

  async close(): Promise<void> {
    for (const c of this.conns) c.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket): void {
    let head = Buffer.alloc(0);
    const onStartup = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      if (head.length < 4 || head.length < head.readInt32BE(0)) return;
      client.off('data', onStartup);
      const app = applicationName(head.subarray(0, head.readInt32BE(0)));
      this.accepted.push(app);
      if (this.refusing?.(app)) {
        client.destroy();
        return;
      }
      const upstream = net.connect(this.targetPort, this.targetHost);
      const conn = new ProxiedConnection(
        client,
        upstream,
        app,
        this.stallOnQuery?.(app) ?? false,
        (sql) => this.trapFor(sql, app),
        (sql) => {
          const armed = this.cutOnSql;
          if (!armed?.match(app, sql)) return false;
          armed.done(sql);
          return true;
        },
      );
      this.conns.add(conn);
      conn.onClose(() => this.conns.delete(conn));
      conn.start(head);
    };
    client.on('data', onStartup);
    client.on('error', () => client.destroy());
  }
}

class ProxiedConnection {
  stalled = false;
  private pending = Buffer.alloc(0);
  private afterStartup = false;
  /** A COMMIT whose answer is being held back: the server's bytes since it went out, and its trap. */
  private held: { trap: CommitTrap; sql: string; bytes: Buffer } | undefined;

  constructor(
    private readonly client: net.Socket,
    private readonly upstream: net.Socket,
    readonly app: string,
    private readonly stallOnQuery: boolean,
    private readonly trapFor: (sql: string) => CommitTrap | undefined,
    /** Sees each statement's text before it is forwarded; true cuts the connection instead. */
    private readonly cutBefore: (sql: string) => boolean,
  ) {}

  start(startup: Buffer): void {
    this.upstream.on('error', () => this.destroy());
    this.client.on('error', () => this.destroy());
    this.client.on('close', () => this.destroy());
    this.upstream.on('close', () => this.destroy());
    this.upstream.on('data', (d: Buffer) => {
      if (this.held) this.fromServerHeld(d);
      else if (!this.stalled) this.client.write(d);
    });
    this.client.on('data', (d: Buffer) => this.fromClient(d));
    this.fromClient(startup);
  }

  get upstreamPort(): number | undefined {
    return this.upstream.localPort;
  }

  onClose(fn: () => void): void {
    this.client.once('close', fn);
  }

  destroy(): void {
    this.client.destroy();
    this.upstream.destroy();
  }

  /**
   * Frames client messages, so "stall at the next query" happens exactly before a 'Q' reaches the server,
   * a statement to cut at (a 'Q' or a Parse) never does, and a trapped COMMIT is known the moment it is sent.
   */
  private fromClient(d: Buffer): void {
    if (this.stalled) return;
    this.pending = Buffer.concat([this.pending, d]);
    for (;;) {
      const headerLen = this.afterStartup ? 5 : 4;
      if (this.pending.length < headerLen) return;
      const len = this.afterStartup ? this.pending.readInt32BE(1) + 1 : this.pending.readInt32BE(0);
      if (this.pending.length < len) return;
      const frame = this.pending.subarray(0, len);
      if (this.afterStartup && frame[0] === 0x51 /* 'Q' */ && this.stallOnQuery) {
        this.stalled = true;
        this.pending = Buffer.alloc(0);
        return;
      }
      const sql = this.afterStartup ? statementText(frame) : undefined;
      if (sql !== undefined && this.cutBefore(sql)) {
        this.pending = Buffer.alloc(0);
        this.destroy();
        return;
      }
      if (sql !== undefined && frame[0] === 0x51) {
        const trap = this.trapFor(sql);
        if (trap) this.held = { trap, sql, bytes: Buffer.alloc(0) };
      }
      this.afterStartup = true;
      this.pending = this.pending.subarray(len);
      this.upstream.write(frame);
    }
  }

  /**
   * The server's answer to a trapped COMMIT: held back until its CommandComplete "COMMIT" (the commit is
   * done), then the connection is cut without relaying any of it. An answer that ends (ReadyForQuery)
   * without one, an error say, is relayed as it was and the trap counts as sprung all the same.
   */
  private fromServerHeld(d: Buffer): void {
    const held = this.held!;
    held.bytes = Buffer.concat([held.bytes, d]);
    for (let at = 0; at + 5 <= held.bytes.length;) {
      const len = held.bytes.readInt32BE(at + 1) + 1;
      if (at + len > held.bytes.length) return;
      const type = held.bytes[at];
      const body = held.bytes.subarray(at + 5, at + len);
      if (type === 0x43 /* 'C' */ && body.toString('utf8') === 'COMMIT\0') {
        this.held = undefined;
        this.destroy();
        held.trap.sprung(held.sql);
        return;
      }
      if (type === 0x5a /* 'Z' */) {
        this.held = undefined;
        this.client.write(held.bytes);
        held.trap.sprung(held.sql);
        return;
      }
      at += len;
    }
  }
}

/** The SQL of a simple query ('Q': text) or a Parse ('P': statement name, then text); else undefined. */
function statementText(frame: Buffer): string | undefined {
  if (frame[0] === 0x51) return frame.subarray(5, frame.indexOf(0, 5)).toString('utf8');
  if (frame[0] === 0x50) {
    const nameEnd = frame.indexOf(0, 5);
    return frame.subarray(nameEnd + 1, frame.indexOf(0, nameEnd + 1)).toString('utf8');
  }
  return undefined;
}

/** application_name from a StartupMessage (int32 length, int32 version, then key\0value\0 pairs). */
function applicationName(startup: Buffer): string {
  const parts = startup.subarray(8).toString('utf8').split('\0');
  for (let i = 0; i + 1 < parts.length; i += 2) {
    if (parts[i] === 'application_name') return parts[i + 1];
  }
  return '';
}
