import type { ActivityHandler, OrchestrationContext, Task } from 'durable-functions';
import * as df from 'durable-functions';

import type { AuditEvent } from '#shared/audit/auditLog';
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

/** Records the event; answers its id (a value: some hosts cannot carry an activity's `undefined`). */
export const auditJobEventActivity: ActivityHandler = async (event: AuditEvent & { id: string }) => {
  await getServices().audit.record(event);
  return { recorded: event.id };
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
