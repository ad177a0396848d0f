/**
 * Payments: orders to look up and refunds against them. Does NOT honour idempotency keys: a
 * repeated refund request is a second refund, which is exactly the hazard the UNKNOWN state and
 * reconciliation exist for. Each refund records our operation reference so lookup can find it.
 */
import {
  answerError,
  answerOk,
  missingStrings,
  type SandboxService,
  type ServiceAnswer,
} from './sandbox-service.ts';

interface Order {
  readonly orderId: string;
  readonly customer: string;
  readonly totalCents: number;
  refundedCents: number;
}

/** Orders ord_1001 .. ord_1050, totals between 50.00 and 549.00 EUR, the same on every start. */
export const SANDBOX_ORDER_COUNT = 50;
const FIRST_ORDER = 1001;
const CUSTOMERS = [
  'Ada Lovelace',
  'Alan Turing',
  'Grace Hopper',
  'Edsger Dijkstra',
  'Barbara Liskov',
];

export class PaymentsService implements SandboxService {
  readonly name = 'payments';
  readonly honoursIdempotencyKeys = false;
  private orders = new Map<string, Order>();
  private nextRefund = 1;

  constructor() {
    this.reset();
  }

  operations(): readonly string[] {
    return ['lookup_order', 'refund'];
  }

  isMutation(operation: string): boolean {
    return operation === 'refund';
  }

  reset(): void {
    this.orders = new Map();
    this.nextRefund = 1;
    for (let i = 0; i < SANDBOX_ORDER_COUNT; i++) {
      const orderId = `ord_${FIRST_ORDER + i}`;
      // A fixed multiplicative step spreads totals without a random source.
      const totalCents = 5_000 + ((i * 7_919) % 500) * 100;
      this.orders.set(orderId, {
        orderId,
        customer: CUSTOMERS[i % CUSTOMERS.length] ?? 'Customer',
        totalCents,
        refundedCents: 0,
      });
    }
  }

  apply(operation: string, body: Readonly<Record<string, unknown>>): ServiceAnswer {
    switch (operation) {
      case 'lookup_order':
        return this.lookupOrder(body);
      case 'refund':
        return this.refund(body);
      default:
        return answerError(404, 'unknown_operation', `payments has no operation ${operation}`);
    }
  }

  private lookupOrder(body: Readonly<Record<string, unknown>>): ServiceAnswer {
    const problems = missingStrings(body, ['order_id']);
    if (problems.length > 0) return answerError(400, 'invalid_request', problems.join('; '));
    const order = this.orders.get(body.order_id as string);
    if (order === undefined)
      return answerError(404, 'order_not_found', `no order ${String(body.order_id)}`);
    return answerOk(describe(order), order.orderId, false);
  }

  private refund(body: Readonly<Record<string, unknown>>): ServiceAnswer {
    const problems = missingStrings(body, ['order_id']);
    const amount = body.amount_cents;
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount <= 0)
      problems.push('amount_cents must be a positive integer');
    if (problems.length > 0) return answerError(400, 'invalid_request', problems.join('; '));
    const order = this.orders.get(body.order_id as string);
    if (order === undefined)
      return answerError(404, 'order_not_found', `no order ${String(body.order_id)}`);
    const amountCents = amount as number;
    const refundable = order.totalCents - order.refundedCents;
    if (amountCents > refundable) {
      return answerError(
        422,
        'refund_exceeds_balance',
        `order ${order.orderId} has ${refundable} cents left to refund`,
      );
    }
    order.refundedCents += amountCents;
    const refundId = `rf_${String(this.nextRefund++).padStart(6, '0')}`;
    const result = {
      refund_id: refundId,
      order_id: order.orderId,
      amount_cents: amountCents,
      currency: 'EUR',
      reason: typeof body.reason === 'string' ? body.reason : null,
      status: 'succeeded',
    };
    return answerOk(result, refundId, true, 201);
  }
}

function describe(order: Order): Record<string, unknown> {
  return {
    order_id: order.orderId,
    customer: order.customer,
    total_cents: order.totalCents,
    refunded_cents: order.refundedCents,
    currency: 'EUR',
    status:
      order.refundedCents === 0
        ? 'paid'
        : order.refundedCents === order.totalCents
          ? 'refunded'
          : 'partially_refunded',
  };
}
