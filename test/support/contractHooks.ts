import { afterAll, afterEach } from 'vitest';

import { takeContractViolations } from './answerContract';

/**
 * Loaded before every test file (vitest `setupFiles`): a test, or a file's hooks, during which an
 * answer differed from the OpenAPI document fails, even when the rejection was caught.
 */
function failOnViolations(): void {
  const problems = takeContractViolations();
  if (problems.length > 0) {
    throw new Error(`answers differ from the OpenAPI document:\n${problems.join('\n')}`);
  }
}

afterEach(failOnViolations);
afterAll(failOnViolations);
