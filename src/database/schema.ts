import { ServiceInstance } from '../instances/service-instance.entity.js';
import { Task } from '../tasks/task.entity.js';
import { CreateServiceInstance1764460000000 } from '../../migrations/1764460000000-create-service-instance.js';
import { CreateTask1764460300000 } from '../../migrations/1764460300000-create-task.js';

/**
 * The one list of entities and migrations. Explicit classes rather than globs, so the app, the TypeORM CLI
 * and the drift check see exactly the same schema whether they run from src (jest) or dist (node).
 */
export const ENTITIES = [ServiceInstance, Task];
export const MIGRATIONS = [CreateServiceInstance1764460000000, CreateTask1764460300000];
