import 'reflect-metadata';
import { PATH_METADATA } from '@nestjs/common/constants.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, parseAllDocuments } from 'yaml';
import { configKeys, loadConfig } from '../../src/app.config.js';
import { ServerConfig } from '../../src/config/server.config.js';
import { DatabaseConfig } from '../../src/database/database.config.js';
import { HealthConfig } from '../../src/health/health.config.js';
import { InstancesConfig } from '../../src/instances/instances.config.js';
import { LifecycleConfig } from '../../src/lifecycle/lifecycle.config.js';
import { ExamplesConfig } from '../../src/tools/examples/examples.config.js';
import { HealthController } from '../../src/health/health.controller.js';
import { DEPLOY_DIR } from '../support/deploy-files.js';
import { REPO_ROOT } from '../support/server-process.js';
import { k8sContainerEnv, kustomizedImage } from './container-env.js';

type Doc = Record<string, any>;

const K8S = join(DEPLOY_DIR, 'k8s');
const read = (f: string): Doc[] =>
  parseAllDocuments(readFileSync(join(K8S, f), 'utf8')).map((d) => {
    if (d.errors.length > 0) throw new Error(`${f}: ${d.errors.map((e) => e.message).join('; ')}`);
    return d.toJS() as Doc;
  });

/** The route the app serves for a HealthController method, from Nest's own routing metadata. */
function healthRoute(method: 'live' | 'ready'): string {
  const base = Reflect.getMetadata(PATH_METADATA, HealthController) as string;
  const path = Reflect.getMetadata(PATH_METADATA, HealthController.prototype[method]) as string;
  return `/${base}/${path}`;
}

/**
 * The Kubernetes manifests, checked without a cluster: they parse, the kustomization lists what exists, and
 * every value that must agree with the app does (probe routes, port, grace period, config variable names).
 */
describe('deploy/k8s manifests', () => {
  const kustomization = parse(readFileSync(join(K8S, 'kustomization.yaml'), 'utf8')) as {
    resources: string[];
    images?: { name: string; newName?: string; newTag?: string }[];
  };
  const docs = kustomization.resources.flatMap(read);
  const byKind = (kind: string): Doc => {
    const found = docs.filter((d) => d.kind === kind);
    expect(found).toHaveLength(1);
    return found[0];
  };
  const byName = (kind: string, name: string): Doc => {
    const found = docs.filter((d) => d.kind === kind && d.metadata.name === name);
    expect(found).toHaveLength(1);
    return found[0];
  };
  const deployment = byName('Deployment', 'mcp-task-server');
  const worker = byName('Deployment', 'mcp-task-server-worker');
  const workerPod = worker.spec.template.spec;
  const workerContainer = workerPod.containers[0];
  const configMap = byKind('ConfigMap');
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const job = byKind('Job');
  const jobContainer = job.spec.template.spec.containers[0];
  const exampleSecret = read('secret.example.yaml')[0];
  // The environment a pod really gets (the image's ENV, the ConfigMap, the example Secret's keys as the
  // Deployment refers to them), validated by the app's own config loader with every production refusal.
  const podEnv = k8sContainerEnv(container, [configMap, exampleSecret]);
  const loaded = loadConfig(podEnv);
  const config = {
    ...loaded.get(DatabaseConfig),
    ...loaded.get(HealthConfig),
    ...loaded.get(LifecycleConfig),
    ...loaded.get(ExamplesConfig),
    PORT: loaded.get(ServerConfig).PORT,
    HOST: loaded.get(ServerConfig).HOST,
    isProduction: loaded.get(ServerConfig).isProduction,
  };
  const CONFIG_KEYS = configKeys();

  it('holds a Deployment, Service, PodDisruptionBudget and HorizontalPodAutoscaler that parse', () => {
    expect(docs.map((d) => d.kind).sort()).toEqual(
      [
        'ConfigMap',
        'Deployment',
        'Deployment',
        'HorizontalPodAutoscaler',
        'Job',
        'PodDisruptionBudget',
        'Service',
      ].sort(),
    );
    for (const d of docs) expect(d.metadata.name).toMatch(/^mcp-task-server/);
  });

  it('sets only variables the config schema knows, and secrets only by reference', () => {
    const names = [...Object.keys(configMap.data), ...container.env.map((e: Doc) => e.name)];
    expect(names.filter((n) => !CONFIG_KEYS.includes(n))).toEqual([]);
    for (const e of container.env) {
      expect(e.value).toBeUndefined();
      expect(e.valueFrom.secretKeyRef.name).toBe('mcp-task-server');
    }
    for (const secret of ['DATABASE_URL', 'MRTR_STATE_SECRET', 'DATABASE_LISTEN_URL', 'METRICS_TOKEN']) {
      expect(configMap.data[secret]).toBeUndefined();
      expect(container.env.map((e: Doc) => e.name)).toContain(secret);
    }
    // The example Secret carries every key the Deployment refers to.
    for (const e of container.env)
      expect(Object.keys(exampleSecret.stringData)).toContain(e.valueFrom.secretKeyRef.key);
  });

  it('passes the production boot check with the example Secret, and needs every secret production needs', () => {
    expect(config.isProduction).toBe(true);
    expect(config.EXAMPLE_TOOLS).toBe(false);
    // A secret production refuses to boot without is never optional: a pod without it would crash-loop
    // instead of waiting in CreateContainerConfigError, which names the missing key.
    for (const name of ['DATABASE_URL', 'MRTR_STATE_SECRET', 'METRICS_TOKEN']) {
      const ref = container.env.find((e: Doc) => e.name === name).valueFrom.secretKeyRef;
      expect([name, ref.optional ?? false]).toEqual([name, false]);
      const { [ref.key]: _, ...withoutIt } = exampleSecret.stringData as Record<string, string>;
      expect(() =>
        k8sContainerEnv(container, [configMap, { ...exampleSecret, stringData: withoutIt }]),
      ).toThrow(new RegExp(`key ${ref.key} of Secret`));
    }
    // Length-validated: the example's placeholder passes, a short token is refused.
    expect(() => loadConfig({ ...podEnv, METRICS_TOKEN: 'change-me' })).toThrow(
      /METRICS_TOKEN must be at least 16/,
    );
  });

  it('migrates with a Job over the direct URL when database-url goes through PgBouncer', () => {
    const pooled = /pgbouncer|:6432\//.test(exampleSecret.stringData['database-url']);
    expect(pooled).toBe(true);
    expect(config.DB_MIGRATIONS_RUN).toBe(false);
    expect(jobContainer.command).toEqual(['node', 'dist/src/cli/main.js', 'migrations', 'run']);
    expect(jobContainer.envFrom).toEqual(container.envFrom);
    const jobEnv = k8sContainerEnv(jobContainer, [configMap, exampleSecret]);
    // The CLI prefers DATABASE_LISTEN_URL (direct to the primary) for migrations.
    expect(jobEnv.DATABASE_LISTEN_URL).toBe(exampleSecret.stringData['database-listen-url']);
    expect(jobEnv.DATABASE_LISTEN_URL).not.toMatch(/pgbouncer|:6432\//);
    expect(loadConfig(jobEnv, { serving: false }).get(ServerConfig).isProduction).toBe(true);
    expect(job.spec.template.spec.restartPolicy).toBe('Never');
    expect(job.spec.template.spec.securityContext).toEqual(pod.securityContext);
  });

  it('runs one image, named in kustomization.yaml, whose build and push the operations guide describes', () => {
    const images = [container.image, jobContainer.image].map((i: string) =>
      kustomizedImage(i, kustomization.images),
    );
    expect(images[0]).toBe(images[1]);
    expect(images[0]).not.toBe(container.image); // the kustomization sets it
    const guide = readFileSync(join(REPO_ROOT, 'docs', 'operations.md'), 'utf8');
    expect(guide).toContain('docker build');
    expect(guide).toContain('docker push');
    expect(guide).toContain('kustomize edit set image mcp-task-server=');
  });

  it('probes the app’s real health routes on its port', () => {
    const port = container.ports.find((p: Doc) => p.name === 'http');
    expect(port.containerPort).toBe(config.PORT);
    expect(container.readinessProbe.httpGet).toEqual({ path: healthRoute('ready'), port: 'http' });
    expect(container.livenessProbe.httpGet).toEqual({ path: healthRoute('live'), port: 'http' });
    expect(container.startupProbe.httpGet).toEqual({ path: healthRoute('live'), port: 'http' });
    // The probe waits longer than the app's own readiness check timeout, so the app answers 503 itself.
    expect(container.readinessProbe.timeoutSeconds * 1000).toBeGreaterThan(config.HEALTH_DB_TIMEOUT_MS);
    expect(config.HOST).toBe('0.0.0.0');
  });

  it('gives a terminating pod preStop + SHUTDOWN_GRACE_MS + a margin before SIGKILL', () => {
    const preStop = container.lifecycle.preStop.exec.command as string[];
    expect(preStop[0]).toBe('sleep');
    const preStopSeconds = Number(preStop[1]);
    const marginSeconds = 5;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(
      preStopSeconds + config.SHUTDOWN_GRACE_MS / 1000 + marginSeconds,
    );
  });

  it('the Service, PDB and HPA point at the Deployment, without affinity', () => {
    const labels = deployment.spec.template.metadata.labels;
    expect(deployment.spec.selector.matchLabels).toEqual(labels);
    const service = byKind('Service');
    expect(service.spec.selector).toEqual(labels);
    expect(service.spec.sessionAffinity ?? 'None').toBe('None');
    expect(service.spec.ports[0].targetPort).toBe('http');
    const pdb = byKind('PodDisruptionBudget');
    expect(pdb.spec.selector.matchLabels).toEqual(labels);
    const hpa = byKind('HorizontalPodAutoscaler');
    expect(hpa.spec.scaleTargetRef).toEqual({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      name: deployment.metadata.name,
    });
    // A PDB that allows every replica to go would not protect anything.
    expect(pdb.spec.maxUnavailable).toBeLessThan(hpa.spec.minReplicas);
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(deployment.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
  });

  it('runs task workers: the same image, config and secrets, INSTANCE_ROLE=worker, outside the Service', () => {
    expect(kustomizedImage(workerContainer.image, kustomization.images)).toBe(
      kustomizedImage(container.image, kustomization.images),
    );
    expect(workerContainer.envFrom).toEqual(container.envFrom);
    // The one plain value is the role; everything else is the web pods' secrets, by reference.
    const plain = workerContainer.env.filter((e: Doc) => e.value !== undefined);
    expect(plain).toEqual([{ name: 'INSTANCE_ROLE', value: 'worker' }]);
    expect(workerContainer.env.filter((e: Doc) => e.value === undefined)).toEqual(container.env);
    const workerEnv = k8sContainerEnv(workerContainer, [configMap, exampleSecret]);
    const workerConfig = loadConfig(workerEnv);
    expect(workerConfig.get(InstancesConfig).INSTANCE_ROLE).toBe('worker');
    expect(workerConfig.get(ServerConfig).isProduction).toBe(true);
    expect(loaded.get(InstancesConfig).INSTANCE_ROLE).toBe('all');
    // Probed, drained and scraped like the web pods (a worker serves /health and /metrics).
    for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe'])
      expect(workerContainer[probe]).toEqual(container[probe]);
    expect(workerContainer.lifecycle).toEqual(container.lifecycle);
    expect(workerPod.terminationGracePeriodSeconds).toBe(pod.terminationGracePeriodSeconds);
    expect(workerPod.securityContext).toEqual(pod.securityContext);
    expect(workerContainer.securityContext).toEqual(container.securityContext);
    expect(worker.spec.template.metadata.annotations).toEqual(deployment.spec.template.metadata.annotations);
    // Its own labels: neither the Service nor the PDB or HPA of the web pods selects it.
    const labels = worker.spec.template.metadata.labels;
    expect(worker.spec.selector.matchLabels).toEqual({
      'app.kubernetes.io/name': labels['app.kubernetes.io/name'],
    });
    const selects = (selector: Record<string, string>): boolean =>
      Object.entries(selector).every(([k, v]) => labels[k] === v);
    expect(selects(byKind('Service').spec.selector)).toBe(false);
    expect(selects(byKind('PodDisruptionBudget').spec.selector.matchLabels)).toBe(false);
    expect(worker.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
    expect(worker.spec.replicas).toBeGreaterThanOrEqual(1);
  });
});
