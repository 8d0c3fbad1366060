import type { Type } from '@nestjs/common';

/**
 * The validated configuration: one instance of every module's config class. Nest code injects the class
 * it needs (`constructor(private readonly config: TasksConfig)`); code outside the container (main.ts, the
 * CLI, tests) asks for it here.
 */
export class LoadedConfig {
  constructor(private readonly sections: ReadonlyMap<Type, object>) {}

  get<T>(cls: Type<T>): T {
    const section = this.sections.get(cls);
    if (!section) {
      throw new Error(`${cls.name} is not a registered config section (is its *.config.ts imported?)`);
    }
    return section as T;
  }

  /** Every section with its class, for the container. */
  entries(): [Type, object][] {
    return [...this.sections.entries()];
  }
}
