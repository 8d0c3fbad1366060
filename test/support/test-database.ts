// Moved to the public testing kit (src/testing); kept so existing suites keep their import path.
export { createTestDatabase, withClient, type TestDatabase } from '../../src/testing/test-database.js';
