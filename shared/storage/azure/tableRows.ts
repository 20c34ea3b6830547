import type { TableClient, TableEntityResult } from '@azure/data-tables';

import { isAzureError, isNotFound } from './azureErrors';

type Row = { partitionKey: string; rowKey: string } & Record<string, unknown>;

/**
 * Single-row operations on a table that is made on first use: a write into a table that does not
 * exist yet answers 404, the table is then created (once per process at a time: concurrent writers
 * share the creation) and the write tried again, once. Reads take a missing table as missing rows.
 */
export class TableRows {
  private tableReady: Promise<void> | undefined;

  constructor(private readonly table: TableClient) {}

  /** The row, or null when it (or the whole table: nothing was ever written) is absent. */
  async get(
    partitionKey: string,
    rowKey: string,
    abortSignal: AbortSignal,
  ): Promise<TableEntityResult<Record<string, unknown>> | null> {
    try {
      return await this.table.getEntity<Record<string, unknown>>(partitionKey, rowKey, { abortSignal });
    } catch (error) {
      if (isNotFound(error)) return null;
      throw error;
    }
  }

  /** Create-only insert; false when the row exists. */
  async create(row: Row, abortSignal: AbortSignal): Promise<boolean> {
    try {
      await this.writing(() => this.table.createEntity(row, { abortSignal }), abortSignal);
      return true;
    } catch (error) {
      if (isAzureError(error, 409, 'EntityAlreadyExists')) return false;
      throw error;
    }
  }

  /** Insert or replace. */
  async upsert(row: Row, abortSignal: AbortSignal): Promise<void> {
    await this.writing(() => this.table.upsertEntity(row, 'Replace', { abortSignal }), abortSignal);
  }

  /** Runs `write`; when the table is missing, creates it and runs `write` once more. */
  async writing<T>(write: () => Promise<T>, abortSignal: AbortSignal): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if (!isAzureError(error, 404)) throw error;
      this.tableReady ??= this.table.createTable({ abortSignal }).finally(() => {
        this.tableReady = undefined;
      });
      await this.tableReady;
      return write();
    }
  }
}
