/**
 * Runs the local realtime simulator on its own, for manual tests and demos of other components:
 *
 *   npx tsx gateway/realtime/simulator/simulator-main.ts [--port 8765] [--script path.yaml] [--speed 1]
 *
 * Point a client at the printed ws:// URL (any model name; no key needed).
 */
import { rootLogger } from '../../../config/log.ts';
import { RealtimeSimulator } from './realtime-simulator.ts';

function option(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

const port = Number(option('port') ?? 0);
const speed = Number(option('speed') ?? 1);
const script = option('script');
const simulator = new RealtimeSimulator({
  port: Number.isInteger(port) && port >= 0 && port <= 65535 ? port : 0,
  speechSpeed: Number.isFinite(speed) && speed >= 0 ? speed : 1,
  recordWire: false,
  ...(script !== undefined && { scriptPath: script }),
});
const url = await simulator.start();
rootLogger().info('realtime simulator listening', { url });

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void simulator.stop().then(() => process.exit(0));
  });
}
