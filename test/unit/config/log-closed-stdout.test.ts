import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const writer = fileURLToPath(new URL('../../fixtures/log/log-to-stdout.ts', import.meta.url));

describe('when the reader of stdout goes away', () => {
  it('should keep the process running and let it exit normally', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', writer, '5000'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    // The first line arrives, then the pipe is closed under the writer.
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    child.stdout.destroy();
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(stderr).toContain('wrote 5000 lines');
    expect(code).toBe(0);
  });
});
