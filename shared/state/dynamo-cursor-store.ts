/**
 * DynamoCursorStore: the production cursor store, one DynamoDB item per state key.
 *
 * Owns: the items of its table (partition key `pk`, a string) and their attributes
 *   version (N)          commit counter; 0 until the first commit
 *   value (S)            the state value as JSON; absent until the first commit (or `note`,
 *                        on a key of notes only: version 0, never a lease or a fence)
 *   leaseOwner (S)       absent when nobody holds the lease
 *   leaseExpiresAt (N)   epoch ms (injected clock) after which anyone may take the lease
 *   fence (N)            the last fence handed out (cursor-rules.ts): `ADD fence :one` in the
 *                        same conditional write that takes the lease; kept by release; absent
 *                        on items from before fences (read as 0, so the next acquisition gets 1)
 *   updatedAt (N)        epoch ms (injected clock) of the last change
 * Never changes state with more than ONE conditional PutItem/UpdateItem per operation: DynamoDB
 * Local emulators (dynalite) have no transactions, and one item written once is one atomic step
 * (docs/decisions/0001-state-item-schema.md). Every read is ConsistentRead, so a run never acts
 * on a cursor older than the last acknowledged commit.
 *
 * The conditions state the rules of cursor-rules.ts; when one fails, a consistent read tells which
 * rule was broken (DynamoDB says only "failed"), and the same functions name the error, so every
 * store throws the same error for the same situation. Lease expiry compares against the caller's
 * clock: writers' clocks must agree to well within the lease TTL (Lambda clocks are NTP-synced;
 * the TTL is 20 min for a 15 min maximum run).
 */

import { randomUUID } from 'node:crypto';
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  CreateTableCommand,
  DeleteItemCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ResourceNotFoundException,
  UpdateItemCommand,
  type UpdateItemCommandInput,
} from '@aws-sdk/client-dynamodb';
import { classifyAwsError } from '../aws/errors.js';
import { guardServiceReplies } from '../aws/service-guard.js';
import type { ErrorCode } from '../contracts/error-codes.js';
import { StateError } from '../contracts/errors.js';
import type {
  Clock,
  CommitRequest,
  CursorStore,
  CursorStoreProbe,
  Lease,
  StateRecord,
  StateValue,
} from '../contracts/state.js';
import {
  checkOwner,
  checkTtl,
  decideCommit,
  decideNote,
  decideRenew,
  decideTakeOver,
  recordOf,
  type StoredState,
  serializeValue,
} from './cursor-rules.js';

/** How the store is built. The client carries region, endpoint and credentials. */
export interface DynamoCursorStoreOptions {
  readonly client: DynamoDBClient;
  readonly tableName: string;
  /** Epoch milliseconds deciding lease expiry. Default Date.now. */
  readonly clock?: Clock;
  /** The custom endpoint the client uses, if any: named in errors. */
  readonly endpoint?: string;
}

/**
 * A failed condition can be explained by a read that shows a state where the write would have
 * passed (the blocker left in between, e.g. a lease released). Then the write is tried again,
 * this many times at most, before the read's verdict is final.
 */
const MAX_CONDITION_ATTEMPTS = 3;
/** ensureTable waits this long for CREATING to become ACTIVE. */
const TABLE_ACTIVE_TIMEOUT_MS = 120_000;

type Item = Record<string, AttributeValue>;

/** A CursorStore on one DynamoDB table; see the module comment for the item layout. */
export class DynamoCursorStore implements CursorStore, CursorStoreProbe {
  readonly #client: DynamoDBClient;
  readonly #table: string;
  readonly #clock: Clock;
  readonly #endpoint: string | undefined;

  constructor(options: DynamoCursorStoreOptions) {
    this.#client = options.client;
    // An endpoint that answers but is not DynamoDB fails as STATE_WRONG_SERVICE, not as a parse error.
    guardServiceReplies(this.#client, 'DynamoDB');
    this.#table = options.tableName;
    this.#clock = options.clock ?? Date.now;
    this.#endpoint = options.endpoint;
  }

  /**
   * Creates the table (PAY_PER_REQUEST, partition key `pk`) if it is missing and waits until it is
   * ACTIVE. For local runs and tests; production tables come from the CDK stack.
   */
  async ensureTable(): Promise<void> {
    const status = await this.#tableStatus();
    if (status === undefined) {
      try {
        await this.#client.send(
          new CreateTableCommand({
            TableName: this.#table,
            AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
            KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
            BillingMode: 'PAY_PER_REQUEST',
          }),
        );
      } catch (err) {
        // Another process created it between our describe and create: fine, wait for it.
        if ((err as Error).name !== 'ResourceInUseException')
          throw this.#explain('', err, 'dynamodb:CreateTable');
      }
    }
    const deadline = Date.now() + TABLE_ACTIVE_TIMEOUT_MS;
    let delay = 50;
    while ((await this.#tableStatus()) !== 'ACTIVE') {
      if (Date.now() >= deadline) {
        throw new StateError(
          'STATE_TABLE_NOT_ACTIVE',
          '',
          `DynamoDB table ${this.#table} did not become ACTIVE within ${TABLE_ACTIVE_TIMEOUT_MS} ms; check it in the console`,
        );
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 1_000);
    }
  }

  async load(key: string): Promise<StateRecord> {
    return recordOf(key, await this.#read(key));
  }

  /**
   * Puts a probe item under `key` and deletes it again, both conditional, as a commit would be.
   * Only PutItem and DeleteItem: the deployed function may call those on its table but not
   * DescribeTable, so a missing table shows as the put's ResourceNotFoundException.
   */
  async probe(key: string): Promise<void> {
    const token = randomUUID();
    try {
      await this.#client.send(
        new PutItemCommand({
          TableName: this.#table,
          Item: { pk: { S: key }, probe: { S: token }, updatedAt: num(this.#clock()) },
          // A probe never replaces an item: were the key ever in use, the put fails instead.
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      await this.#client.send(
        new DeleteItemCommand({
          TableName: this.#table,
          Key: { pk: { S: key } },
          // Deletes only our own probe, never an item someone else put under the key meanwhile.
          ConditionExpression: 'probe = :token',
          ExpressionAttributeValues: { ':token': { S: token } },
        }),
      );
    } catch (err) {
      throw this.#explainProbe(key, err);
    }
  }

  async acquire(key: string, owner: string, ttlMs: number): Promise<StateRecord> {
    checkOwner(key, owner);
    checkTtl(key, ttlMs);
    return this.#takeLease(key, owner, ttlMs, undefined);
  }

  async takeOver(key: string, owner: string, ttlMs: number, from: string): Promise<StateRecord> {
    checkOwner(key, owner);
    checkOwner(key, from);
    checkTtl(key, ttlMs);
    return this.#takeLease(key, owner, ttlMs, from);
  }

  /** `acquire`, and with `from` `takeOver`: one conditional write takes the lease and the next fence. */
  async #takeLease(
    key: string,
    owner: string,
    ttlMs: number,
    from: string | undefined,
  ): Promise<StateRecord> {
    for (let attempt = 1; ; attempt++) {
      const now = this.#clock();
      const updated = await this.#update(key, {
        // ADD increments the fence atomically with the lease (a missing attribute counts as 0),
        // and only when the condition passes, so no two acquisitions ever get the same fence.
        UpdateExpression:
          'SET leaseOwner = :owner, leaseExpiresAt = :expiresAt, updatedAt = :now, version = if_not_exists(version, :zero) ADD fence :one',
        // Prevents two runs holding the lease at once: both read "free", both write their
        // name, the second silently overwrites the first and both sync the table. The write
        // passes only if, at write time, the item is new, has no lease, has an expired one,
        // or the lease is already ours (re-acquire after a restart of the same run).
        // takeOver adds `leaseOwner = :from`. The caller checked that `from` is dead BEFORE this
        // write; a run that took the lease in between (now holding it under its own name) fails
        // the condition, so a takeover can only ever displace the holder it checked.
        ConditionExpression:
          'attribute_not_exists(pk) OR attribute_not_exists(leaseOwner) OR leaseExpiresAt <= :now OR leaseOwner = :owner' +
          (from === undefined ? '' : ' OR leaseOwner = :from'),
        ExpressionAttributeValues: {
          ':owner': { S: owner },
          ...(from === undefined ? {} : { ':from': { S: from } }),
          ':expiresAt': num(now + ttlMs),
          ':now': num(now),
          ':zero': num(0),
          ':one': num(1),
        },
      });
      if (updated !== undefined) return recordOf(key, updated);
      // The read throws LeaseHeldError naming the holder; if it shows the lease free, the
      // holder released it in between and the write is tried again.
      decideTakeOver(key, await this.#read(key), owner, ttlMs, from, now);
      if (attempt >= MAX_CONDITION_ATTEMPTS)
        throw contended(key, from === undefined ? 'acquire' : 'takeOver');
    }
  }

  async renew(key: string, owner: string, ttlMs: number): Promise<Lease> {
    checkOwner(key, owner);
    checkTtl(key, ttlMs);
    const now = this.#clock();
    const updated = await this.#update(key, {
      UpdateExpression: 'SET leaseExpiresAt = :expiresAt, updatedAt = :now',
      // Prevents a run whose lease already expired (and may have been taken over) from
      // extending it again and running on beside the new holder.
      ConditionExpression: 'leaseOwner = :owner AND leaseExpiresAt > :now',
      ExpressionAttributeValues: { ':owner': { S: owner }, ':expiresAt': num(now + ttlMs), ':now': num(now) },
    });
    if (updated !== undefined) return updated.lease!;
    // Versions and leases only move forward, so a failed renew is final: the read only names it.
    decideRenew(key, await this.#read(key), owner, ttlMs, now);
    throw contended(key, 'renew');
  }

  async commit(key: string, req: CommitRequest): Promise<StateRecord> {
    checkOwner(key, req.owner);
    if (req.renewTtlMs !== undefined) checkTtl(key, req.renewTtlMs, 'renewTtlMs');
    // Size check before any write: DynamoDB would refuse an item over 400 KB after the fact.
    const text = serializeValue(key, req.value);
    for (let attempt = 1; ; attempt++) {
      const now = this.#clock();
      const values: Record<string, AttributeValue> = {
        ':expected': num(req.expectedVersion),
        ':next': num(req.expectedVersion + 1),
        ':value': { S: text },
        ':owner': { S: req.owner },
        ':now': num(now),
      };
      let set = 'SET version = :next, #value = :value, updatedAt = :now';
      if (req.renewTtlMs !== undefined) {
        set += ', leaseExpiresAt = :expiresAt';
        values[':expiresAt'] = num(now + req.renewTtlMs);
      }
      const updated = await this.#update(key, {
        UpdateExpression: set,
        // version = :expected prevents the lost update: two writers that loaded version N both
        // commit N+1 and the later one erases the earlier one's cursor (and its object refs).
        // leaseOwner/leaseExpiresAt prevent a zombie commit: a run whose lease expired and was
        // taken over must not move the cursor under the new holder, even with the right version.
        // The item exists only if someone acquired, so no attribute_not_exists branch is needed.
        ConditionExpression: 'version = :expected AND leaseOwner = :owner AND leaseExpiresAt > :now',
        ExpressionAttributeNames: { '#value': 'value' },
        ExpressionAttributeValues: values,
      });
      if (updated !== undefined) return recordOf(key, updated);
      const current = await this.#read(key);
      // Throws LeaseLostError or CursorConflictError (with both versions) like the other stores.
      decideCommit(key, current, req, now);
      if (attempt >= MAX_CONDITION_ATTEMPTS) throw contended(key, 'commit');
    }
  }

  async release(key: string, owner: string): Promise<void> {
    await this.#update(key, {
      UpdateExpression: 'REMOVE leaseOwner, leaseExpiresAt SET updatedAt = :now',
      // Prevents releasing a lease that a new holder took after ours expired: only the owner
      // named in the item may drop it. A failed condition means "not ours": nothing to do.
      ConditionExpression: 'leaseOwner = :owner',
      ExpressionAttributeValues: { ':owner': { S: owner }, ':now': num(this.#clock()) },
    });
  }

  async note(key: string, value: StateValue): Promise<void> {
    const text = serializeValue(key, value);
    for (let attempt = 1; ; attempt++) {
      const updated = await this.#update(key, {
        UpdateExpression: 'SET version = :zero, #value = :value, updatedAt = :now',
        // Prevents a note from replacing a cursor: a key that ever had a lease (a fence), has one
        // now, or has a committed version belongs to the lease protocol, and only `commit` under
        // the lease may write it. A key of notes only has none of them, so the last note wins.
        ConditionExpression:
          'attribute_not_exists(pk) OR (attribute_not_exists(leaseOwner) AND attribute_not_exists(fence) AND (attribute_not_exists(version) OR version = :zero))',
        ExpressionAttributeNames: { '#value': 'value' },
        ExpressionAttributeValues: { ':zero': num(0), ':value': { S: text }, ':now': num(this.#clock()) },
      });
      if (updated !== undefined) return;
      // Throws STATE_KEY_LEASED like the other stores; a key that reads as free is tried again.
      decideNote(key, await this.#read(key), value);
      if (attempt >= MAX_CONDITION_ATTEMPTS) throw contended(key, 'note');
    }
  }

  /** One conditional UpdateItem; undefined when the condition failed (nothing was written). */
  async #update(
    key: string,
    input: Omit<UpdateItemCommandInput, 'TableName' | 'Key' | 'ReturnValues'>,
  ): Promise<StoredState | undefined> {
    try {
      const out = await this.#client.send(
        new UpdateItemCommand({
          ...input,
          TableName: this.#table,
          Key: { pk: { S: key } },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return fromItem(key, out.Attributes);
    } catch (err) {
      if (
        err instanceof ConditionalCheckFailedException ||
        (err as Error).name === 'ConditionalCheckFailedException'
      ) {
        return undefined;
      }
      throw this.#explain(key, err);
    }
  }

  async #read(key: string): Promise<StoredState> {
    try {
      const out = await this.#client.send(
        new GetItemCommand({ TableName: this.#table, Key: { pk: { S: key } }, ConsistentRead: true }),
      );
      return fromItem(key, out.Item);
    } catch (err) {
      throw this.#explain(key, err);
    }
  }

  async #tableStatus(): Promise<string | undefined> {
    try {
      const out = await this.#client.send(new DescribeTableCommand({ TableName: this.#table }));
      return out.Table?.TableStatus ?? 'UNKNOWN';
    } catch (err) {
      if (isMissingTable(err)) return undefined;
      throw this.#explain('', err, 'dynamodb:DescribeTable');
    }
  }

  /**
   * Failures an operator can fix (a missing table, an endpoint that does not answer, no region,
   * no credentials, access denied) become one StateError naming the spec field and the fix;
   * anything else passes unchanged.
   */
  #explain(key: string, err: unknown, action = 'dynamodb:GetItem/UpdateItem'): unknown {
    if (isMissingTable(err)) {
      return new StateError(
        'STATE_TABLE_MISSING',
        key,
        `DynamoDB table ${this.#table} does not exist${this.#endpoint ? ` at ${this.#endpoint}` : ''}${key ? ` (reading state of ${key})` : ''}; deploy the stack (cdk deploy creates it), fix state.dynamodb.table, or set state.dynamodb.endpoint for a local emulator (tidemark then creates it)`,
        { cause: err },
      );
    }
    const failure = classifyAwsError(err, {
      service: 'DynamoDB',
      field: 'state.dynamodb',
      resource: `table ${this.#table}`,
      action,
      endpoint: this.#endpoint,
    });
    if (!failure) return err;
    // NOT_FOUND names the table (ResourceNotFoundException, answered above): the one resource here.
    const code: ErrorCode = failure.kind === 'NOT_FOUND' ? 'STATE_TABLE_MISSING' : `STATE_${failure.kind}`;
    return new StateError(code, key, failure.message, { cause: err });
  }

  /** A failed probe as the operator's fix: the classified failure, or a refused conditional write. */
  #explainProbe(key: string, err: unknown): StateError {
    const explained = this.#explain(key, err, 'dynamodb:PutItem/DeleteItem');
    if (explained instanceof StateError) return explained;
    const e = err as { name?: string; code?: string; message?: string };
    const why = `${e.code ?? e.name ?? 'Error'}: ${e.message ?? String(err)}`;
    return new StateError(
      'STATE_STORE_FAILED',
      key,
      `DynamoDB refused a conditional put/delete of probe item ${key} in table ${this.#table} (${why}); check the credentials and that the role may dynamodb:PutItem and dynamodb:DeleteItem on the table`,
      { cause: err },
    );
  }
}

/** Socket-level failures of the SDK's HTTP handler: nothing answered at the endpoint. */

function isMissingTable(err: unknown): boolean {
  return err instanceof ResourceNotFoundException || (err as Error)?.name === 'ResourceNotFoundException';
}

/** Decodes an item; an absent item is the empty state. */
function fromItem(key: string, item: Item | undefined): StoredState {
  if (item === undefined) return { version: 0, value: undefined, lease: undefined, fence: 0 };
  const version = Number(item.version?.N ?? '0');
  let value: StateValue | undefined;
  if (item.value?.S !== undefined) {
    try {
      value = JSON.parse(item.value.S) as StateValue;
    } catch (cause) {
      throw new StateError(
        'STATE_CORRUPT',
        key,
        `state item ${key} has a value that is not JSON; fix or delete the item to start ${key} over`,
        { cause },
      );
    }
  }
  const fence = Number(item.fence?.N ?? '0');
  const owner = item.leaseOwner?.S;
  const expiresAt = item.leaseExpiresAt?.N;
  const lease =
    owner !== undefined && expiresAt !== undefined
      ? { owner, expiresAt: Number(expiresAt), fence }
      : undefined;
  return { version, value, lease, fence };
}

function num(n: number): AttributeValue {
  return { N: String(n) };
}

/** The condition failed, yet every read after it shows a state where it would pass. */
function contended(key: string, op: string): StateError {
  return new StateError(
    'STATE_CONTENDED',
    key,
    `${op} of ${key} failed its condition ${MAX_CONDITION_ATTEMPTS} times while consistent reads showed it would pass; the item is changing too fast (several runs racing?), retry later`,
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
