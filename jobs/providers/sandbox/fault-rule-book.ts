/**
 * Fault rules installed through the admin API. A rule matches requests by service, operation
 * (`book`, `refund`, ..., or `lookup` / `cancel` for those endpoints) and tenant, each optional;
 * among the requests it matches, it applies to numbers `nth` .. `nth + times - 1` (1-based,
 * counted from the rule's installation). That makes "the third refund of tenant a times out"
 * expressible without racing the test against the server.
 */
import { mergeFaultSpecs, parseFaultSpec, type FaultSpec } from './fault-spec.ts';

export interface FaultRuleInput {
  readonly service?: string;
  readonly operation?: string;
  readonly tenant?: string;
  readonly nth?: number;
  readonly times?: number;
  readonly fault: string;
}

export interface FaultRule extends FaultRuleInput {
  readonly id: string;
  readonly spec: FaultSpec;
  /** Requests matched so far (applied or not). */
  seen: number;
  /** Requests the fault was applied to. */
  applied: number;
}

export interface FaultTarget {
  readonly service: string;
  readonly operation: string;
  readonly tenant: string;
}

export class FaultRuleBook {
  private rules: FaultRule[] = [];
  private nextId = 1;

  add(input: FaultRuleInput): FaultRule {
    const rule: FaultRule = {
      ...input,
      id: `rule_${this.nextId++}`,
      spec: parseFaultSpec(input.fault),
      seen: 0,
      applied: 0,
    };
    this.rules.push(rule);
    return rule;
  }

  list(): readonly FaultRule[] {
    return this.rules;
  }

  clear(): void {
    this.rules = [];
  }

  /** The merged spec of every rule that applies to this request; counts the match. */
  match(target: FaultTarget): FaultSpec {
    const specs: FaultSpec[] = [];
    for (const rule of this.rules) {
      if (rule.service !== undefined && rule.service !== target.service) continue;
      if (rule.operation !== undefined && rule.operation !== target.operation) continue;
      if (rule.tenant !== undefined && rule.tenant !== target.tenant) continue;
      rule.seen += 1;
      const first = rule.nth ?? 1;
      const last =
        rule.times === undefined
          ? rule.nth === undefined
            ? Infinity
            : first
          : first + rule.times - 1;
      if (rule.seen >= first && rule.seen <= last) {
        rule.applied += 1;
        specs.push(rule.spec);
      }
    }
    return mergeFaultSpecs(...specs);
  }
}
