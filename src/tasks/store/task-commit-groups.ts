import { Injectable } from '@nestjs/common';
import {
  CommitGroupQueue,
  type CommitGroupListener,
  type CommitGroupOptions,
} from '../../database/commit-group.js';
import { TasksConfig } from '../tasks.config.js';

/**
 * The task store's commit groups (creations, worker outcomes): each is made here, sized by
 * TASK_COMMIT_GROUP_MAX, and every group that runs is told to the listeners (the metrics, tests) under its
 * kind.
 */
@Injectable()
export class TaskCommitGroups {
  private readonly listeners: CommitGroupListener[] = [];

  constructor(private readonly config: TasksConfig) {}

  /** A commit-group queue of `kind`, at most TASK_COMMIT_GROUP_MAX entries per group. */
  queue<E, R>(
    kind: 'create' | 'finish',
    options: Omit<CommitGroupOptions<E, R>, 'maxGroup' | 'onGroup'>,
  ): CommitGroupQueue<E, R> {
    return new CommitGroupQueue({
      ...options,
      maxGroup: this.config.TASK_COMMIT_GROUP_MAX,
      onGroup: (size, fellBack) => {
        for (const l of this.listeners) l(kind, size, fellBack);
      },
    });
  }

  /** Told of every group of every kind once it has run. */
  onGroup(listener: CommitGroupListener): void {
    this.listeners.push(listener);
  }
}
