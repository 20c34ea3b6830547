import { openApiDocument } from '../../shared/api/openapi';
import { type Answer, AnswerChecker } from './openapiContract';

/**
 * The end-to-end tests' hold on the API contract: every answer their HTTP helpers receive from
 * Cairn is checked against the OpenAPI document. A mismatch rejects the request (so the test that
 * made it fails where it awaited it) and is also kept until the test ends, when the hooks of
 * `contractHooks.ts` fail the test with it: a test that catches the rejection cannot hide it.
 */

let checker: AnswerChecker | undefined;
const unreported: string[] = [];

export class ContractViolation extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`the answer differs from the OpenAPI document:\n${problems.join('\n')}`);
    this.name = 'ContractViolation';
  }
}

/** Throws {@link ContractViolation} when the answer is not as the document says. */
export function checkAnswer(answer: Answer): void {
  checker ??= new AnswerChecker(openApiDocument);
  const problems = checker.check(answer);
  if (problems.length === 0) return;
  unreported.push(...problems);
  throw new ContractViolation(problems);
}

/** The mismatches seen since the last call (and forgets them). */
export function takeContractViolations(): string[] {
  return unreported.splice(0);
}
