/**
 * callgate's entry point. `npm start` runs the gateway and the worker in one process on the
 * embedded defaults; `--role gateway` or `--role worker` (or CALLGATE_ROLE) runs one of them.
 */
import type { CallAgents } from '../agents/agent-module.ts';
import { startProcess } from '../jobs/process-runtime.ts';
import { startActionLayer } from '../jobs/worker-main.ts';
import { callAgents, startCallGateway, type CallGateway } from './call/start-call-gateway.ts';
import { applyGatewayNice } from './process-priority.ts';
import { openTenantsOnPublicListener } from './sip/open-trunks.ts';

type Role = 'all' | 'gateway' | 'worker';

function parseRole(argv: readonly string[], env: NodeJS.ProcessEnv): Role {
  const flag = argv.indexOf('--role');
  const value = flag >= 0 ? argv[flag + 1] : env.CALLGATE_ROLE;
  if (value === undefined || value === '') return 'all';
  if (value === 'all' || value === 'gateway' || value === 'worker') return value;
  process.stderr.write(`callgate: unknown role ${value} (use all, gateway or worker)\n`);
  process.exit(2);
}

const role = parseRole(process.argv.slice(2), process.env);
let agents: CallAgents | undefined;
let gateway: CallGateway | undefined;
// A gateway's agent module is read before anything starts: a bad one exits 2 like a bad file.
const context = await startProcess(role, {
  ...(role !== 'worker' && {
    prepare: async (config, log) => {
      agents = await callAgents(config, log);
    },
  }),
});
const layer = await startActionLayer(context, { runWorkers: role !== 'gateway' });
if (role !== 'worker') {
  // After Redis (a private redis-server is a child process) and before the listeners open.
  applyGatewayNice(context.config.gateway.nice, context.log);
  try {
    gateway = await startCallGateway(context, layer, agents);
  } catch (error) {
    // A shutdown that began during startup closes what the gateway was starting on: not an error.
    if (!context.draining.aborted) {
      // A SIP port in use or a model that cannot start: one clear line, then the normal shutdown.
      context.log.error('gateway could not start', { error });
      process.kill(process.pid, 'SIGTERM');
    }
    await new Promise(() => undefined);
  }
  context.log.info('gateway role started', {
    sip: `${context.config.sip.listen}:${context.config.sip.udpPort}`,
  });
  for (const tenant of openTenantsOnPublicListener(context.config))
    context.log.warn('tenant takes calls from anyone on a non-loopback SIP listener', {
      tenant,
      fix: 'set trunk.allowFrom or trunk.digest instead of trunk.open',
    });
}
await context.markStarted();
// "callgate ready" means calls can arrive: a drachtio driver first needs its connection.
const signaling = gateway?.driver.readiness() ?? { ready: true };
if (signaling.ready) context.log.info('callgate ready', { role });
else {
  context.log.warn('callgate started; waiting for the SIP driver before it is ready', {
    role,
    reason: signaling.reason,
  });
  void gateway?.driver.whenReady().then(() => context.log.info('callgate ready', { role }));
}
