/**
 * A partial render of a chart template, for tests where no helm binary runs: the conditions a test
 * decides (sip.tls.enabled) choose their branch, every other `if` keeps all of its branches,
 * `range` and `with` bodies are kept once, and `include` of a template defined in _helpers.tpl is
 * replaced by its body, rendered the same way (except those named in `opaque`). Variable
 * assignments render nothing, as in Helm; other actions stay as they are written (`{{ .Values.x }}`,
 * trim markers dropped), so a test matches what lies around them.
 * Indentation from nindent is not applied: match with \s+.
 */

export interface RenderDecisions {
  /** The value of `.Values.sip.tls.enabled` (also as `$tls.enabled`, `$.Values...`, `.root.Values...`). */
  readonly tlsEnabled: boolean;
  /** Templates whose include stays as written: "callgate.config" is checked through chart-render.ts. */
  readonly opaque?: readonly string[];
}

type Node =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'action'; readonly action: string }
  | { readonly kind: 'if'; readonly branches: { cond: string | undefined; body: Node[] }[] }
  | { readonly kind: 'block'; readonly head: string; readonly body: Node[] };

const TLS_ENABLED = /^(?:\$tls|\$?(?:\.root)?\.Values\.sip\.tls)\.enabled$/;
const INCLUDE = /^include "([^"]+)"/;
const ASSIGNMENT = /^\$[a-zA-Z_]\w*\s*:?=/;

export function renderTemplate(text: string, helpers: string, decisions: RenderDecisions): string {
  const defines = new Map<string, Node[]>();
  for (const node of parse(helpers)) {
    const name = node.kind === 'block' ? /^define "([^"]+)"$/.exec(node.head)?.[1] : undefined;
    if (name !== undefined && node.kind === 'block') defines.set(name, node.body);
  }
  return render(parse(text), { decisions, defines, depth: 0 });
}

interface RenderContext {
  readonly decisions: RenderDecisions;
  readonly defines: ReadonlyMap<string, Node[]>;
  readonly depth: number;
}

function render(nodes: readonly Node[], context: RenderContext): string {
  return nodes.map((node) => renderNode(node, context)).join('');
}

function renderNode(node: Node, context: RenderContext): string {
  switch (node.kind) {
    case 'text':
      return node.text;
    case 'action':
      return renderAction(node.action, context);
    case 'block':
      // A define inside a template file renders only where it is included.
      return node.head.startsWith('define ') ? '' : render(node.body, context);
    case 'if':
      return renderIf(node.branches, context);
  }
}

function renderAction(action: string, context: RenderContext): string {
  if (ASSIGNMENT.test(action)) return '';
  const name = INCLUDE.exec(action)?.[1];
  const opaque = name !== undefined && (context.decisions.opaque ?? []).includes(name);
  const body = name === undefined || opaque ? undefined : context.defines.get(name);
  if (body === undefined || context.depth > 20) return `{{ ${action} }}`;
  return render(body, { ...context, depth: context.depth + 1 });
}

/** The first decided branch that holds; with an undecided condition, every branch. */
function renderIf(
  branches: readonly { cond: string | undefined; body: Node[] }[],
  context: RenderContext,
): string {
  let kept = '';
  for (const branch of branches) {
    const decided = decide(branch.cond, context.decisions);
    if (decided === false) continue;
    kept += render(branch.body, context);
    if (decided === true) return kept;
  }
  return kept;
}

/** true or false for a condition the test decides, undefined for any other (else: true). */
function decide(cond: string | undefined, decisions: RenderDecisions): boolean | undefined {
  if (cond === undefined) return true;
  if (TLS_ENABLED.test(cond)) return decisions.tlsEnabled;
  const negated = /^not \(?(.+?)\)?$/.exec(cond)?.[1];
  if (negated !== undefined && TLS_ENABLED.test(negated)) return !decisions.tlsEnabled;
  return undefined;
}

/** The template as a tree of text, actions and blocks; comments are left out. */
function parse(text: string): Node[] {
  const root: Node[] = [];
  const stack: { nodes: Node[]; open?: Extract<Node, { kind: 'if' }> }[] = [{ nodes: root }];
  const top = () =>
    stack[stack.length - 1] as { nodes: Node[]; open?: Extract<Node, { kind: 'if' }> };
  let at = 0;
  let trimNext = false;
  for (const match of text.matchAll(/\{\{(-?)\s*([\s\S]*?)\s*(-?)\}\}/g)) {
    const before = text.slice(at, match.index);
    at = match.index + match[0].length;
    const trimmed = trimFor(before, trimNext, match[1] === '-');
    trimNext = match[3] === '-';
    if (trimmed !== '') top().nodes.push({ kind: 'text', text: trimmed });
    const action = match[2] ?? '';
    if (action.startsWith('/*')) continue;
    const keyword = /^(if|else if|else|range|with|define|end)\b\s*([\s\S]*)$/.exec(action);
    if (keyword === null) {
      top().nodes.push({ kind: 'action', action });
      continue;
    }
    const [, word, rest = ''] = keyword;
    if (word === 'if') {
      const node: Extract<Node, { kind: 'if' }> = {
        kind: 'if',
        branches: [{ cond: rest, body: [] }],
      };
      top().nodes.push(node);
      stack.push({ nodes: node.branches[0]?.body ?? [], open: node });
    } else if (word === 'else if' || word === 'else') {
      const frame = stack.pop();
      const node = frame?.open;
      if (node === undefined) throw new Error(`{{ ${action} }} outside an if`);
      const branch = { cond: word === 'else' ? undefined : rest, body: [] as Node[] };
      node.branches.push(branch);
      stack.push({ nodes: branch.body, open: node });
    } else if (word === 'end') {
      if (stack.length === 1) throw new Error('{{ end }} without a block');
      stack.pop();
    } else {
      const node: Node = { kind: 'block', head: `${word} ${rest}`.trim(), body: [] };
      top().nodes.push(node);
      stack.push({ nodes: node.body });
    }
  }
  const tail = trimFor(text.slice(at), trimNext, false);
  if (tail !== '') top().nodes.push({ kind: 'text', text: tail });
  if (stack.length !== 1) throw new Error('a block is not closed');
  return root;
}

/** Text between two actions: `-}}` before it trims its start, `{{-` after it its end. */
function trimFor(text: string, trimStart: boolean, trimEnd: boolean): string {
  let result = trimStart ? text.replace(/^\s+/, '') : text;
  if (trimEnd) result = result.replace(/\s+$/, '');
  return result;
}
