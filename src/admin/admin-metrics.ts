import type { Registry } from 'prom-client';

/** One sample of a metric of this instance. */
export interface Sample {
  labels: Record<string, string | number>;
  value: number;
}

/**
 * The samples of a metric this instance registered (the janitor's and the quotas' counters): the console
 * shows the same numbers /metrics would, without a second bookkeeping. An unregistered name gives none.
 */
export async function samplesOf(registry: Registry, name: string): Promise<Sample[]> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return [];
  const { values } = await metric.get();
  return values.map((v) => ({ labels: v.labels as Record<string, string | number>, value: v.value }));
}
