/**
 * The realtime model a gateway talks to, chosen once from `config.model`: OpenAI when its key is
 * set (or `provider: openai`), otherwise the local simulator started on loopback inside the
 * process. Calls open one session each through `openSession()`; the same client class serves both.
 */
import type { Config } from '../../config/schema.ts';
import { CallgateError } from '../../config/errors.ts';
import { registerSecret, rootLogger, type Logger } from '../../config/log.ts';
import {
  OpenAIRealtimeSession,
  type OpenAIRealtimeSessionOptions,
} from './openai-realtime-session.ts';
import { RealtimeSimulator } from './simulator/realtime-simulator.ts';

export type ModelConfig = Config['model'];

export interface RealtimeModelOptions {
  /** Where the API key is read from; the process environment by default. */
  env?: Readonly<Record<string, string | undefined>>;
  logger?: Logger;
}

export type SessionOptions = Omit<
  OpenAIRealtimeSessionOptions,
  'url' | 'model' | 'apiKey' | 'voice'
> & {
  /** The call's realtime model (its agent's or its tenant's); unset, model.openai.model. */
  readonly model?: string;
};

export class RealtimeModel {
  private constructor(
    readonly provider: 'openai' | 'simulator',
    private readonly url: string,
    private readonly model: string,
    private readonly voice: string,
    private readonly apiKey: string | undefined,
    private readonly simulator: RealtimeSimulator | undefined,
  ) {}

  static async start(
    config: ModelConfig,
    options: RealtimeModelOptions = {},
  ): Promise<RealtimeModel> {
    const env = options.env ?? process.env;
    const logger = (options.logger ?? rootLogger()).child({ component: 'realtime' });
    const apiKey = env[config.openai.apiKeyEnv];
    const useOpenAI =
      config.provider === 'openai' ||
      (config.provider === 'auto' && apiKey !== undefined && apiKey !== '');
    if (useOpenAI) {
      if (apiKey === undefined || apiKey === '') {
        throw new CallgateError('CALLGATE_ERR_MODEL_CONNECT', {
          url: config.openai.url,
          reason: `${config.openai.apiKeyEnv} is not set`,
        });
      }
      registerSecret(apiKey);
      logger.info('realtime model: OpenAI', { url: config.openai.url, model: config.openai.model });
      return new RealtimeModel(
        'openai',
        config.openai.url,
        config.openai.model,
        config.openai.voice,
        apiKey,
        undefined,
      );
    }
    const simulator = new RealtimeSimulator({
      ...(config.simulator.script !== undefined && { scriptPath: config.simulator.script }),
      // A long-running gateway keeps no wire log of every call.
      recordWire: false,
      logger,
    });
    const url = await simulator.start();
    logger.info('realtime model: local simulator', {
      url,
      script: config.simulator.script ?? 'demo',
    });
    return new RealtimeModel(
      'simulator',
      url,
      config.openai.model,
      config.openai.voice,
      undefined,
      simulator,
    );
  }

  /** A new, not yet connected session for one call. */
  openSession(options: SessionOptions = {}): OpenAIRealtimeSession {
    const { model, ...session } = options;
    return new OpenAIRealtimeSession({
      ...session,
      url: this.url,
      model: model ?? this.model,
      voice: this.voice,
      ...(this.apiKey !== undefined && { apiKey: this.apiKey }),
    });
  }

  async stop(): Promise<void> {
    await this.simulator?.stop();
  }
}
