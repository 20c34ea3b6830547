import type { ActivityHandler, OrchestrationContext, Task } from 'durable-functions';
import * as df from 'durable-functions';

import type { AuditEvent } from '#shared/audit/auditLog';
import { checkJobAudit, knownAdminActors } from '#shared/migration/jobInput';
import { InvalidArgumentError } from '#shared/protocol/errors';
import { getServices } from '#shared/services';

/**
 * How admin jobs (migration, rewrap) are audited: the orchestrator records `<job>.started` and
 * `<job>.completed` through an activity. The orchestration's start is the job's commit point and
 * the durable runtime runs every scheduled activity to the end, retrying it, so a record and the
 * job never disagree; each event's id is the job's instance id and the step, so a retried activity
 * records it once.
 */
export const AUDIT_JOB_EVENT = 'auditJobEvent';

/** Who started a job and into whose trail its records go; absent when auditing is off. */
export interface JobAudit {
  readonly tenant: string;
  readonly actor: string;
}

/** The actions {@link jobEvent} records; the activity records no other. */
const JOB_ACTIONS = new Set([
  'admin.migration.started',
  'admin.migration.completed',
  'admin.rewrap.started',
  'admin.rewrap.completed',
]);

/**
 * Records the event; answers its id (a value: some hosts cannot carry an activity's `undefined`).
 * Its input may come from anyone who can reach the durable runtime, so it is checked as the job's
 * route makes it: a job action, an id of that action, the actor an admin's (docs/audit.md).
 */
export const auditJobEventActivity: ActivityHandler = async (input: AuditEvent & { id: string }) => {
  const services = getServices();
  if (typeof input !== 'object' || input === null)
    throw new InvalidArgumentError('input', 'must be an object');
  if (!JOB_ACTIONS.has(input.action)) throw new InvalidArgumentError('action', 'must be an admin job action');
  if (typeof input.id !== 'string' || !input.id.startsWith(`${input.action}:`)) {
    throw new InvalidArgumentError('id', 'must be the action and the job id');
  }
  checkJobAudit('event', { tenant: input.tenant, actor: input.actor }, knownAdminActors(services.config));
  await services.audit.record(input);
  return { recorded: input.id };
};

df.app.activity(AUDIT_JOB_EVENT, { handler: auditJobEventActivity });

/** The activity call recording `action` of the orchestration (deterministic: ids from the instance id). */
export function jobEvent(
  context: OrchestrationContext,
  retry: df.RetryOptions,
  audit: JobAudit,
  action: string,
  details: Readonly<Record<string, string | number | boolean | null>>,
): Task {
  const event: AuditEvent & { id: string } = {
    id: `${action}:${context.df.instanceId}`,
    tenant: audit.tenant,
    action,
    actor: audit.actor,
    subject: context.df.instanceId,
    outcome: 'ok',
    details,
  };
  return context.df.callActivityWithRetry(AUDIT_JOB_EVENT, retry, event);
}
