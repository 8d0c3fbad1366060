import { existsSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { parse } from 'yaml';
import { REPO_ROOT } from '../support/server-process.js';

/**
 * What a container of this project really gets as its environment, worked out without a Docker engine the way
 * Docker does it: the image's `ENV` lines (runtime stage of the Dockerfile), then a compose service's
 * `env_file`s, then its `environment`, with `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`,
 * `${VAR?error}`, `${VAR:+alt}` and `$$` interpolated from the shell and the project's `.env`, as
 * `docker compose` does.
 */

export type Env = Record<string, string>;

/** The `ENV` of the last stage of a Dockerfile (the image that runs), in order. */
export function dockerfileEnv(path = join(REPO_ROOT, 'Dockerfile')): Env {
  const lines = readFileSync(path, 'utf8')
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/);
  let env: Env = {};
  for (const line of lines) {
    const [instr, ...rest] = line.trim().split(/\s+/);
    if (/^FROM$/i.test(instr ?? '')) env = {};
    if (!/^ENV$/i.test(instr ?? '')) continue;
    const args = rest.join(' ');
    if (!args.includes('=')) {
      const [k, ...v] = rest; // legacy `ENV KEY value`
      env[k] = v.join(' ');
      continue;
    }
    for (const m of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
      env[m[1]] = m[2].startsWith('"') ? (JSON.parse(m[2]) as string) : m[2];
    }
  }
  return env;
}

/** A dotenv file as compose reads it: KEY=VALUE lines, `#` comments, optional `export `, quoted values. */
export function parseDotenv(text: string): Env {
  const env: Env = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)$/.exec(line);
    if (!m) throw new Error(`unexpected line in env file: ${raw}`);
    let value = m[2];
    if (/^'.*'$/.test(value)) value = value.slice(1, -1);
    else if (/^".*"$/.test(value))
      value = value
        .slice(1, -1)
        .replace(/\\n/g, '\n')
        .replace(/\\(["\\])/g, '$1');
    else value = value.replace(/\s+#.*$/, '').trim();
    env[m[1]] = value;
  }
  return env;
}

/** Compose's interpolation of one value. Throws, as compose refuses to start, on `${VAR:?error}` unset. */
export function interpolate(value: string, vars: Env): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])((?:[^}$]|\$\{[^}]*\})*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (whole, braced: string | undefined, op: string | undefined, arg: string | undefined, bare) => {
      if (whole === '$$') return '$';
      const name = braced ?? (bare as string);
      const v = vars[name];
      const unset = v === undefined;
      const empty = unset || v === '';
      switch (op) {
        case undefined:
          return v ?? '';
        case ':-':
          return empty ? interpolate(arg ?? '', vars) : v;
        case '-':
          return unset ? interpolate(arg ?? '', vars) : v;
        case ':?':
        case '?':
          if (op === ':?' ? empty : unset)
            throw new Error(`required variable ${name} is missing a value: ${arg}`);
          return v;
        case ':+':
          return empty ? '' : interpolate(arg ?? '', vars);
        case '+':
          return unset ? '' : interpolate(arg ?? '', vars);
        default:
          throw new Error(`unsupported interpolation ${whole}`);
      }
    },
  );
}

interface ComposeService {
  build?: string | { context?: string; dockerfile?: string };
  image?: string;
  env_file?: string | (string | { path: string; required?: boolean })[];
  environment?: Record<string, string | number | boolean | null> | string[];
}

export interface ComposeProject {
  /** Where `.env` and relative `env_file`s are read (the operator's checkout). */
  projectDir: string;
  /** The operator's shell environment; it wins over `.env` in interpolation. */
  shellEnv?: Env;
  composeFile?: string;
}

export function loadComposeServices(
  composeFile = join(REPO_ROOT, 'docker-compose.yml'),
): Record<string, ComposeService> {
  return (
    parse(readFileSync(composeFile, 'utf8'), { merge: true }) as { services: Record<string, ComposeService> }
  ).services;
}

/** The environment one service's container starts with (image ENV < env_file < environment). */
export function composeServiceEnv(service: string, project: ComposeProject): Env {
  const composeFile = project.composeFile ?? join(REPO_ROOT, 'docker-compose.yml');
  const svc = loadComposeServices(composeFile)[service];
  if (!svc) throw new Error(`no service ${service}`);
  const dotenvPath = join(project.projectDir, '.env');
  const vars: Env = {
    ...(existsSync(dotenvPath) ? parseDotenv(readFileSync(dotenvPath, 'utf8')) : {}),
    ...(project.shellEnv ?? {}),
  };
  const resolvePath = (p: string): string => (isAbsolute(p) ? p : join(project.projectDir, p));

  let env: Env = {};
  if (svc.build !== undefined) {
    const context = typeof svc.build === 'string' ? svc.build : (svc.build.context ?? '.');
    const dockerfile = typeof svc.build === 'string' ? 'Dockerfile' : (svc.build.dockerfile ?? 'Dockerfile');
    env = dockerfileEnv(join(REPO_ROOT, context, dockerfile));
  }
  const envFiles =
    svc.env_file === undefined ? [] : Array.isArray(svc.env_file) ? svc.env_file : [svc.env_file];
  for (const f of envFiles) {
    const { path, required = true } = typeof f === 'string' ? { path: f } : f;
    const full = resolvePath(interpolate(path, vars));
    if (!existsSync(full)) {
      if (required) throw new Error(`env file ${full} not found`);
      continue;
    }
    env = { ...env, ...parseDotenv(readFileSync(full, 'utf8')) };
  }
  const entries: [string, string | undefined][] = Array.isArray(svc.environment)
    ? svc.environment.map((e) => {
        const i = e.indexOf('=');
        return i === -1 ? [e, vars[e]] : [e.slice(0, i), e.slice(i + 1)];
      })
    : Object.entries(svc.environment ?? {}).map(([k, v]) => [k, v === null ? vars[k] : String(v)]);
  for (const [k, v] of entries) {
    if (v === undefined) continue; // `KEY` alone with nothing in the shell: compose leaves it unset
    env[k] = interpolate(v, vars);
  }
  return env;
}

type K8sDoc = Record<string, any>;

/**
 * What the kubelet gives a container: the image's ENV, then `envFrom` (ConfigMaps, Secrets), then `env`
 * (values and secretKeyRef / configMapKeyRef). A reference to a missing key that is not `optional` fails the
 * pod (CreateContainerConfigError), so it throws here.
 */
export function k8sContainerEnv(container: K8sDoc, objects: K8sDoc[], imageEnv: Env = dockerfileEnv()): Env {
  const find = (kind: string, name: string): Record<string, string> | undefined => {
    const o = objects.find((d) => d.kind === kind && d.metadata?.name === name);
    if (!o) return undefined;
    return kind === 'Secret' ? { ...(o.data ?? {}), ...(o.stringData ?? {}) } : (o.data ?? {});
  };
  const env: Env = { ...imageEnv };
  for (const from of container.envFrom ?? []) {
    const [kind, ref] = from.configMapRef ? ['ConfigMap', from.configMapRef] : ['Secret', from.secretRef];
    const data = find(kind, ref.name);
    if (!data) {
      if (ref.optional) continue;
      throw new Error(`${kind} ${ref.name} not found`);
    }
    Object.assign(env, data);
  }
  for (const e of container.env ?? []) {
    if (e.value !== undefined) {
      env[e.name] = String(e.value);
      continue;
    }
    const [kind, ref] = e.valueFrom.secretKeyRef
      ? ['Secret', e.valueFrom.secretKeyRef]
      : ['ConfigMap', e.valueFrom.configMapKeyRef];
    const value = find(kind, ref.name)?.[ref.key];
    if (value === undefined) {
      if (ref.optional) continue;
      throw new Error(`${e.name}: key ${ref.key} of ${kind} ${ref.name} not found`);
    }
    env[e.name] = String(value);
  }
  return env;
}

/** kustomize's `images:` transformer, for a manifest checked without kubectl. */
export function kustomizedImage(
  image: string,
  images: { name: string; newName?: string; newTag?: string }[] = [],
): string {
  const [name, tag] = image.split(':');
  const rule = images.find((i) => i.name === name);
  if (!rule) return image;
  const newTag = rule.newTag ?? tag;
  return `${rule.newName ?? name}${newTag ? `:${newTag}` : ''}`;
}
