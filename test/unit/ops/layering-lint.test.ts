import { join } from 'node:path';
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..', '..');

/** The project's own eslint.config.js, without type information: the layering rule needs none. */
const eslint = new ESLint({ cwd: ROOT, overrideConfig: [tseslint.configs.disableTypeChecked] });

/** Lints `source` as if it were the file at `path` (relative to the project root). */
async function layeringErrors(path: string, source: string): Promise<string[]> {
  const [result] = await eslint.lintText(source, { filePath: join(ROOT, path) });
  return (result?.messages ?? [])
    .filter((message) => message.ruleId === 'no-restricted-imports')
    .map((message) => message.message);
}

describe('when a folder imports across the layers gateway -> agents -> jobs -> config', () => {
  it.each([
    ['jobs/worker-main.ts', "import { main } from '../gateway/main.ts';"],
    ['jobs/ledger/keys.ts', "import type { Agent } from '../../agents/agent.ts';"],
    ['jobs/ledger/keys.ts', "export * from '../../agents/agent.ts';"],
    ['agents/agent.ts', "import '../gateway/call/call-session.ts';"],
    ['agents/agent-config.ts', "import { x } from '../gateway/main.ts';"],
    ['config/log.ts', "import { ActionLayer } from '../jobs/action-layer.ts';"],
    ['config/log.ts', "import { Agent } from '../agents/agent.ts';"],
    ['gateway/main.ts', "import { startRedis } from '../test/support/redis.ts';"],
    ['jobs/worker-main.ts', "import { run } from '../bench/run.ts';"],
    ['agents/agent.ts', "import { demo } from '../scripts/demo.ts';"],
  ])('should reject %s importing upwards: %s', async (path, source) => {
    expect(await layeringErrors(path, source)).toHaveLength(1);
  });

  it.each([
    ['gateway/main.ts', "import { Agent } from '../agents/agent.ts';"],
    ['gateway/call/call-session.ts', "import { ActionLayer } from '../../jobs/action-layer.ts';"],
    ['agents/agent.ts', "import { ActionLayer } from '../jobs/action-layer.ts';"],
    ['agents/agent.ts', "import { log } from '../config/log.ts';"],
    ['jobs/ledger/keys.ts', "import { log } from '../../config/log.ts';"],
    ['jobs/ledger/keys.ts', "import { Operation } from '../../jobs/ledger/operation.ts';"],
    ['config/load.ts', "import { parseConfig } from './schema.ts';"],
    ['test/unit/agents/x.test.ts', "import { main } from '../../../gateway/main.ts';"],
    ['bench/run.ts', "import { main } from '../gateway/main.ts';"],
    ['scripts/demo.ts', "import { main } from '../gateway/main.ts';"],
  ])('should accept %s importing downwards or from tooling: %s', async (path, source) => {
    expect(await layeringErrors(path, source)).toEqual([]);
  });
});
