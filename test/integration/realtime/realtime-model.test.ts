import { describe, expect, it } from 'vitest';
import { modelSchema } from '../../../config/schema.ts';
import { RealtimeModel } from '../../../gateway/realtime/realtime-model.ts';
import { quietLogger } from './realtime-harness.ts';

describe('when no model key is configured', () => {
  it('should start the local simulator and open sessions against it', async () => {
    const model = await RealtimeModel.start(modelSchema.parse({}), {
      env: {},
      logger: quietLogger,
    });
    try {
      expect(model.provider).toBe('simulator');
      const session = model.openSession({ logger: quietLogger });
      await session.connect();
      await session.configure({ instructions: '', inputFormat: 'pcmu', outputFormat: 'pcmu' });
      const done = new Promise<string>((resolve) =>
        session.on('response_done', (event) => resolve(event.status)),
      );
      session.createResponse();
      expect(await done).toBe('completed');
      await session.close();
    } finally {
      await model.stop();
    }
  });
});

describe('when the model key is set', () => {
  it('should choose OpenAI without starting a simulator', async () => {
    const model = await RealtimeModel.start(modelSchema.parse({}), {
      env: { OPENAI_API_KEY: 'sk-test-0123456789' },
      logger: quietLogger,
    });
    expect(model.provider).toBe('openai');
    await model.stop();
  });

  it('should refuse provider openai without a key', async () => {
    await expect(
      RealtimeModel.start(modelSchema.parse({ provider: 'openai' }), {
        env: {},
        logger: quietLogger,
      }),
    ).rejects.toMatchObject({ code: 'CALLGATE_ERR_MODEL_CONNECT' });
  });
});
