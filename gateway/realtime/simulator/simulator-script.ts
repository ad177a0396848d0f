/**
 * What the simulated model says and does, from a YAML or JSON script. The simulator does not
 * recognise words: steps fire on the caller's Nth utterance or on a DTMF digit; tool outputs and
 * system messages are spoken through templates.
 *
 * Templates: `{output.path.to.field|fallback}` reads the tool output (JSON), `{output}` is the raw
 * output, `{tool}` the tool name, `{text}` the system message. A missing value becomes the
 * fallback after `|`, or "unknown".
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { CallgateError } from '../../../config/errors.ts';

const toolCallSchema = z.strictObject({
  name: z
    .string()
    .regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be a function name (letters, digits, _ and -)'),
  arguments: z.record(z.string(), z.unknown()).default({}),
});

const stepSchema = z
  .strictObject({
    /** Spoken first, in the same response as the tool calls. */
    say: z.string().min(1).max(2000).optional(),
    /** Several entries are parallel function calls in one response. */
    tools: z.array(toolCallSchema).min(1).max(8).optional(),
  })
  .refine((step) => step.say !== undefined || step.tools !== undefined, {
    message: 'a step needs say, tools or both',
  });

export const simulatorScriptSchema = z.strictObject({
  name: z.string().min(1).default('script'),
  /** The first response of a call when nothing else is pending. */
  greeting: z.string().min(1).max(2000),
  /** Spoken when a response is asked for and no step, tool output or message is pending. */
  fallback: z.string().min(1).max(2000),
  /** Keyed by utterance number: "1" is the caller's first utterance. */
  utterances: z
    .record(
      z.string().regex(/^[1-9][0-9]{0,3}$/, 'must be an utterance number (1, 2, ...)'),
      stepSchema,
    )
    .default({}),
  /** Keyed by DTMF digit: 0-9, *, #, A-D. */
  digits: z
    .record(z.string().regex(/^[0-9A-D*#]$/, 'must be one DTMF digit'), stepSchema)
    .default({}),
  /** Keyed by tool name; `default` covers tools without their own line. */
  toolOutputs: z.record(z.string(), z.string().min(1).max(2000)).default({}),
  /** Spoken for an injected system message (not for DTMF messages, which are digits). */
  systemMessage: z.string().min(1).max(2000).default('{text}'),
});

export type SimulatorScript = z.infer<typeof simulatorScriptSchema>;
export type SimulatorStep = z.infer<typeof stepSchema>;

export const DEMO_SCRIPT_PATH = fileURLToPath(new URL('./demo-script.yaml', import.meta.url));

/** Parses a script from YAML or JSON text (JSON is YAML). */
export function parseSimulatorScript(text: string, source = 'inline'): SimulatorScript {
  let raw: unknown;
  try {
    raw = parseYaml(text, { maxAliasCount: 16 });
  } catch (error) {
    throw new CallgateError('CALLGATE_ERR_SIMULATOR_SCRIPT', {
      source,
      problems: (error as Error).message,
    });
  }
  const parsed = simulatorScriptSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
      .join('; ');
    throw new CallgateError('CALLGATE_ERR_SIMULATOR_SCRIPT', { source, problems });
  }
  return parsed.data;
}

export async function loadSimulatorScript(
  path: string = DEMO_SCRIPT_PATH,
): Promise<SimulatorScript> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new CallgateError('CALLGATE_ERR_SIMULATOR_SCRIPT', {
      source: path,
      problems: (error as Error).message,
    });
  }
  return parseSimulatorScript(text, path);
}

export interface TemplateValues {
  output?: string;
  tool?: string;
  text?: string;
}

export function renderTemplate(template: string, values: TemplateValues): string {
  let parsedOutput: unknown;
  let outputParsed = false;
  const outputValue = (): unknown => {
    if (!outputParsed) {
      outputParsed = true;
      try {
        parsedOutput = values.output === undefined ? undefined : JSON.parse(values.output);
      } catch {
        parsedOutput = undefined;
      }
    }
    return parsedOutput;
  };
  return template.replace(
    /\{([a-z_]+)((?:\.[A-Za-z0-9_]+)*)(?:\|([^}]*))?\}/g,
    (whole, name: string, path: string, fallback: string | undefined) => {
      let value: unknown;
      if (name === 'output') {
        value = path === '' ? values.output : dig(outputValue(), path.slice(1).split('.'));
      } else if (name === 'tool') {
        value = values.tool;
      } else if (name === 'text') {
        value = values.text;
      } else {
        return whole;
      }
      if (typeof value === 'string') return value === '' ? (fallback ?? 'unknown') : value;
      if (typeof value === 'number' || typeof value === 'boolean') return String(value);
      return fallback ?? 'unknown';
    },
  );
}

function dig(value: unknown, path: string[]): unknown {
  let current = value;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}
