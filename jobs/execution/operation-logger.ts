/**
 * The logger of one attempt: its lines carry the operation's correlation fields, as a child logger
 * would, but the child is made only when a line is written at an enabled level. Most attempts
 * write nothing at the configured level, and making a child (a copy of every field) per attempt
 * was a visible cost in the worker's profile.
 */
import { Logger, type LogFields, type LogLevel } from '../../config/log.ts';
import { operationLogFields, type Operation } from '../ledger/operation.ts';

type Correlated = Pick<
  Operation,
  'operationId' | 'idempotencyKey' | 'tenantId' | 'action' | 'scope'
>;

export class OperationLogger extends Logger {
  private made: Logger | undefined;

  constructor(
    private readonly parent: Logger,
    private readonly op: Correlated,
  ) {
    super();
  }

  override child(fields: LogFields): Logger {
    return this.correlated().child(fields);
  }

  override isEnabled(level: LogLevel): boolean {
    return this.parent.isEnabled(level);
  }

  override debug(msg: string, fields?: LogFields): void {
    if (this.parent.isEnabled('debug')) this.correlated().debug(msg, fields);
  }

  override info(msg: string, fields?: LogFields): void {
    if (this.parent.isEnabled('info')) this.correlated().info(msg, fields);
  }

  override warn(msg: string, fields?: LogFields): void {
    if (this.parent.isEnabled('warn')) this.correlated().warn(msg, fields);
  }

  override error(msg: string, fields?: LogFields): void {
    if (this.parent.isEnabled('error')) this.correlated().error(msg, fields);
  }

  private correlated(): Logger {
    this.made ??= this.parent.child(operationLogFields(this.op));
    return this.made;
  }
}
