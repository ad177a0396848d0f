/**
 * A minimal drachtio-server for tests: the drachtio wire protocol (`<bytes>#<uuid>|<type>|...`) on
 * a loopback TCP port for drachtio-srf clients, and real SIP over UDP on another loopback port for
 * the carrier (sipp). It answers as drachtio-server 0.9.10 does in the cases the driver depends on:
 * `authenticate` with `OK|<hostports>|<version>` or `NO|incorrect secret` followed by closing the
 * connection; `route|<verb>` registers a client for out-of-dialog requests, and a request nobody
 * registered for gets 503 (its log: "No connected clients found to handle incoming options
 * request"); an INVITE gets 100 Trying from the server itself; a CANCEL is answered by the server
 * (200 to the CANCEL, 487 to the INVITE) and relayed to the client; a response for a transaction the
 * server no longer has gets `NOK|Response not sent due to unknown transaction`. Dialog ids follow
 * drachtio's `<Call-ID>;from-tag=<tag>`. Retransmissions of the server's own 200 are not modelled
 * (loopback UDP does not lose datagrams).
 */
import { randomUUID } from 'node:crypto';
import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';

const CRLF = '\r\n';
export const DRACHTIO_VERSION = 'v0.9.10';
export const UNKNOWN_TRANSACTION = 'Response not sent due to unknown transaction';

interface SipText {
  readonly startLine: string;
  readonly headers: readonly (readonly [string, string])[];
  readonly body: string;
}

interface Endpoint {
  readonly address: string;
  readonly port: number;
}

interface ServerTransaction {
  readonly id: string;
  readonly request: SipText;
  readonly source: Endpoint;
  readonly toTag: string;
  readonly dialogId: string | undefined;
}

interface Dialog {
  readonly id: string;
  readonly callId: string;
  /** The To header callgate's side put in its 200 (with the server's tag): From of its requests. */
  readonly local: string;
  /** The caller's From: To of requests sent to it. */
  readonly remote: string;
  readonly remoteTarget: string;
  readonly peer: Endpoint;
  cseq: number;
}

interface Client {
  readonly socket: Socket;
  authenticated: boolean;
  readonly verbs: Set<string>;
  buffer: Buffer;
}

interface ClientTransaction {
  readonly id: string;
  readonly dialogId: string;
  readonly client: Client;
}

export interface DrachtioServerOptions {
  readonly secret: string;
}

/** What the server saw, for assertions. */
export interface DrachtioServerRecord {
  /** Every authenticate request, with whether its secret was accepted. */
  readonly authentications: { readonly at: number; readonly accepted: boolean }[];
  /** Responses the client sent for transactions the server no longer had (a 200 after a CANCEL). */
  readonly unknownTransactionResponses: string[];
  /** Every request relayed to a client, as `<METHOD> <Call-ID>`. */
  readonly relayedRequests: string[];
  /** Every response a client had sent to the carrier, as `<status> <CSeq method> <Call-ID>`. */
  readonly sentResponses: string[];
}

export class DrachtioWireServer {
  readonly record: DrachtioServerRecord = {
    authentications: [],
    unknownTransactionResponses: [],
    relayedRequests: [],
    sentResponses: [],
  };
  private secret: string;
  private tcp: Server | undefined;
  private udp: UdpSocket | undefined;
  private clientPortNumber = 0;
  private sipPortNumber = 0;
  private readonly clients = new Set<Client>();
  /** INVITE and other server transactions still awaiting a final response from a client. */
  private readonly transactions = new Map<string, ServerTransaction>();
  private readonly inviteByBranch = new Map<string, ServerTransaction>();
  private readonly lastResponseByBranch = new Map<string, string>();
  private readonly dialogs = new Map<string, Dialog>();
  private readonly clientTransactions = new Map<string, ClientTransaction>();

  private constructor(options: DrachtioServerOptions) {
    this.secret = options.secret;
  }

  /** Listens on free loopback ports (or the client port given, to come back after `stopListening`). */
  static async start(options: DrachtioServerOptions): Promise<DrachtioWireServer> {
    const server = new DrachtioWireServer(options);
    await server.openSip();
    await server.listen();
    return server;
  }

  get clientPort(): number {
    return this.clientPortNumber;
  }

  get sipPort(): number {
    return this.sipPortNumber;
  }

  /** Clients that authenticated and are still connected. */
  connectedClients(): number {
    return [...this.clients].filter((client) => client.authenticated).length;
  }

  /** Verbs the connected clients registered with `route`. */
  routes(): string[] {
    return [...this.clients].flatMap((client) => [...client.verbs]);
  }

  /** From now on, authentication checks this secret. */
  setSecret(secret: string): void {
    this.secret = secret;
  }

  /** Drops every client connection (drachtio-server restarting, or the network between). */
  dropClients(): void {
    for (const client of this.clients) client.socket.destroy();
    this.clients.clear();
  }

  /** Opens the client listener (again, on the same port once it had one). */
  async listen(): Promise<void> {
    const tcp = createServer((socket) => this.acceptClient(socket));
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(this.clientPortNumber, '127.0.0.1', () => resolve());
    });
    this.tcp = tcp;
    this.clientPortNumber = (tcp.address() as AddressInfo).port;
  }

  /** Closes the client listener and drops the clients: connects are refused until `listen`. */
  async stopListening(): Promise<void> {
    const tcp = this.tcp;
    this.tcp = undefined;
    this.dropClients();
    if (tcp !== undefined) await new Promise<void>((resolve) => tcp.close(() => resolve()));
  }

  async close(): Promise<void> {
    await this.stopListening();
    const udp = this.udp;
    this.udp = undefined;
    if (udp !== undefined) await new Promise<void>((resolve) => udp.close(() => resolve()));
  }

  // ---- the wire protocol (clients) --------------------------------------------------------------

  private acceptClient(socket: Socket): void {
    const client: Client = {
      socket,
      authenticated: false,
      verbs: new Set(),
      buffer: Buffer.alloc(0),
    };
    this.clients.add(client);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.readClient(client, chunk));
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.clients.delete(client));
  }

  private readClient(client: Client, chunk: Buffer): void {
    client.buffer = Buffer.concat([client.buffer, chunk]);
    for (;;) {
      const hash = client.buffer.indexOf('#');
      if (hash <= 0) return;
      const length = Number(client.buffer.subarray(0, hash).toString('utf8'));
      if (!Number.isInteger(length) || length <= 0) {
        // drachtio-server: "client sent invalid message -- message length not specified properly".
        client.socket.destroy();
        return;
      }
      if (client.buffer.length < hash + 1 + length) return;
      const message = client.buffer.subarray(hash + 1, hash + 1 + length).toString('utf8');
      client.buffer = client.buffer.subarray(hash + 1 + length);
      this.handleClientMessage(client, message);
    }
  }

  private sendToClient(client: Client, text: string): void {
    if (client.socket.destroyed) return;
    client.socket.write(`${Buffer.byteLength(text, 'utf8')}#${text}`);
  }

  private reply(client: Client, msgId: string, ...fields: string[]): void {
    this.sendToClient(client, [randomUUID(), 'response', msgId, ...fields].join('|'));
  }

  private handleClientMessage(client: Client, message: string): void {
    const lineEnd = message.indexOf(CRLF);
    const leader = lineEnd === -1 ? message : message.slice(0, lineEnd);
    const tokens = leader.split('|');
    const msgId = tokens[0] ?? '';
    switch (tokens[1]) {
      case 'authenticate':
        this.handleAuthenticate(client, msgId, tokens[2] ?? '');
        return;
      case 'route':
        client.verbs.add((tokens[2] ?? '').toLowerCase());
        this.reply(client, msgId, 'OK');
        return;
      case 'remove_route':
        client.verbs.delete((tokens[2] ?? '').toLowerCase());
        this.reply(client, msgId, 'OK');
        return;
      case 'ping':
        this.reply(client, msgId, 'OK', 'pong');
        return;
      case 'sip':
        this.handleClientSip(
          client,
          msgId,
          tokens[2] ?? '',
          tokens[3] ?? '',
          message.slice(lineEnd + 2),
        );
        return;
      default:
        this.reply(client, msgId, 'NO', 'Unknown message type');
        client.socket.end();
    }
  }

  private handleAuthenticate(client: Client, msgId: string, secret: string): void {
    const accepted = secret === this.secret;
    this.record.authentications.push({ at: Date.now(), accepted });
    if (!accepted) {
      this.reply(client, msgId, 'NO', 'incorrect secret');
      // drachtio-server: "disconnecting client due to error processing client message".
      client.socket.end();
      return;
    }
    client.authenticated = true;
    this.reply(client, msgId, 'OK', `udp/127.0.0.1:${this.sipPortNumber}`, DRACHTIO_VERSION);
  }

  private handleClientSip(
    client: Client,
    msgId: string,
    transactionId: string,
    dialogId: string,
    raw: string,
  ): void {
    const message = parseSip(raw);
    if (message.startLine.startsWith('SIP/2.0')) {
      this.relayClientResponse(client, msgId, transactionId, message);
      return;
    }
    if (dialogId.length > 0) {
      this.sendRequestInDialog(client, msgId, dialogId, message);
      return;
    }
    this.sendRequestOutOfDialog(client, msgId, message);
  }

  /** The meta fields drachtio puts before a message: source, size, transport, address, port, time. */
  private meta(source: 'network' | 'application', text: string, peer: Endpoint): string {
    return [source, Buffer.byteLength(text), 'udp', peer.address, peer.port, clock()].join('|');
  }

  private relayClientResponse(
    client: Client,
    msgId: string,
    transactionId: string,
    message: SipText,
  ): void {
    const transaction = this.transactions.get(transactionId);
    if (transaction === undefined) {
      this.record.unknownTransactionResponses.push(message.startLine);
      this.reply(client, msgId, 'NOK', UNKNOWN_TRANSACTION);
      return;
    }
    const status = Number(message.startLine.split(' ')[1]);
    const request = transaction.request;
    const method = cseqMethod(request);
    const callId = header(request, 'Call-ID') ?? '';
    const isInvite = method === 'INVITE';
    const withTag = isInvite && status > 100;
    const extra = message.headers.filter(([name]) => !CORE_HEADERS.has(name.toLowerCase()));
    const contact =
      isInvite && status >= 200 && status < 300 && !extra.some(([n]) => /^contact$/i.test(n))
        ? [['Contact', `<sip:127.0.0.1:${this.sipPortNumber}>`] as const]
        : [];
    const text = serializeSip({
      startLine: message.startLine,
      headers: [
        ...headersNamed(request, 'Via'),
        ['From', header(request, 'From') ?? ''],
        [
          'To',
          withTag
            ? withToTag(header(request, 'To') ?? '', transaction.toTag)
            : (header(request, 'To') ?? ''),
        ],
        ['Call-ID', callId],
        ['CSeq', header(request, 'CSeq') ?? ''],
        ...contact,
        ...extra,
      ],
      body: message.body,
    });
    this.sendSip(text, transaction.source);
    this.lastResponseByBranch.set(branchKey(request, transaction.source), text);
    this.record.sentResponses.push(`${status} ${method} ${callId}`);
    let dialogId = transaction.dialogId ?? '';
    if (status >= 200) {
      this.transactions.delete(transactionId);
      if (isInvite && status < 300) dialogId = this.openDialog(transaction, text);
    }
    this.reply(
      client,
      msgId,
      'OK',
      this.meta('application', text, transaction.source),
      transactionId,
      dialogId,
      '',
      `Msg sent:${CRLF}${text}`,
    );
  }

  private openDialog(transaction: ServerTransaction, sentResponse: string): string {
    const request = transaction.request;
    const callId = header(request, 'Call-ID') ?? '';
    const id = `${callId};from-tag=${tagOf(header(request, 'From') ?? '')}`;
    const sent = parseSip(sentResponse);
    this.dialogs.set(id, {
      id,
      callId,
      local: header(sent, 'To') ?? '',
      remote: header(request, 'From') ?? '',
      remoteTarget: uriOf(header(request, 'Contact') ?? '') ?? requestUri(request),
      peer: transaction.source,
      cseq: 0,
    });
    return id;
  }

  private sendRequestInDialog(
    client: Client,
    msgId: string,
    dialogId: string,
    message: SipText,
  ): void {
    const dialog = this.dialogs.get(dialogId);
    if (dialog === undefined) {
      this.reply(client, msgId, 'NOK', 'unable to find dialog for dialog id provided');
      return;
    }
    const method = message.startLine.split(' ')[0] ?? '';
    dialog.cseq += 1;
    const branch = `z9hG4bK-${randomUUID()}`;
    const extra = message.headers.filter(([name]) => !CORE_HEADERS.has(name.toLowerCase()));
    const text = serializeSip({
      startLine: `${method} ${dialog.remoteTarget} SIP/2.0`,
      headers: [
        ['Via', `SIP/2.0/UDP 127.0.0.1:${this.sipPortNumber};branch=${branch};rport`],
        ['Max-Forwards', '70'],
        ['From', dialog.local],
        ['To', dialog.remote],
        ['Call-ID', dialog.callId],
        ['CSeq', `${dialog.cseq} ${method}`],
        ['Contact', `<sip:127.0.0.1:${this.sipPortNumber}>`],
        ...extra,
      ],
      body: message.body,
    });
    const transactionId = randomUUID();
    this.clientTransactions.set(branch, { id: transactionId, dialogId, client });
    // drachtio-server clears the dialog when it sends the BYE.
    if (method === 'BYE') this.dialogs.delete(dialogId);
    this.sendSip(text, dialog.peer);
    this.reply(
      client,
      msgId,
      'OK',
      this.meta('application', text, dialog.peer),
      transactionId,
      dialogId,
      '',
      `Msg sent:${CRLF}${text}`,
    );
  }

  /** An OPTIONS ping and the like, sent to the Request-URI's host and port. */
  private sendRequestOutOfDialog(client: Client, msgId: string, message: SipText): void {
    const [method = '', uri = ''] = message.startLine.split(' ');
    const target = /@?([0-9.]+)(?::(\d+))?/.exec(uri.replace(/^sips?:/, '').split(';')[0] ?? '');
    if (target === null) {
      this.reply(client, msgId, 'NOK', 'invalid request uri');
      return;
    }
    const peer = { address: target[1] ?? '127.0.0.1', port: Number(target[2] ?? 5060) };
    const branch = `z9hG4bK-${randomUUID()}`;
    const extra = message.headers.filter(([name]) => !CORE_HEADERS.has(name.toLowerCase()));
    const text = serializeSip({
      startLine: `${method} ${uri} SIP/2.0`,
      headers: [
        ['Via', `SIP/2.0/UDP 127.0.0.1:${this.sipPortNumber};branch=${branch};rport`],
        ['Max-Forwards', '70'],
        ['From', `<sip:127.0.0.1:${this.sipPortNumber}>;tag=${randomUUID().slice(0, 8)}`],
        ['To', `<${uri}>`],
        ['Call-ID', randomUUID()],
        ['CSeq', `1 ${method}`],
        ...extra,
      ],
      body: message.body,
    });
    const transactionId = randomUUID();
    this.clientTransactions.set(branch, { id: transactionId, dialogId: '', client });
    this.sendSip(text, peer);
    this.reply(
      client,
      msgId,
      'OK',
      this.meta('application', text, peer),
      transactionId,
      '',
      '',
      `Msg sent:${CRLF}${text}`,
    );
  }

  /** A SIP message from the network, handed to a client as drachtio-server does. */
  private relayToClient(
    client: Client,
    text: string,
    from: Endpoint,
    transactionId: string,
    dialogId: string,
  ): void {
    const leader = [
      randomUUID(),
      'sip',
      this.meta('network', text, from),
      transactionId,
      dialogId,
      '127.0.0.1',
      String(this.sipPortNumber),
      '',
    ].join('|');
    this.sendToClient(client, `${leader}${CRLF}${text}`);
  }

  private clientFor(verb: string): Client | undefined {
    return [...this.clients].find((client) => client.authenticated && client.verbs.has(verb));
  }

  // ---- SIP (the carrier) ------------------------------------------------------------------------

  private async openSip(): Promise<void> {
    const udp = createSocket('udp4');
    udp.on('message', (data, info) => this.receiveSip(data.toString('utf8'), info));
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', () => resolve()));
    this.udp = udp;
    this.sipPortNumber = udp.address().port;
  }

  private sendSip(text: string, to: Endpoint): void {
    this.udp?.send(text, to.port, to.address);
  }

  private answer(
    request: SipText,
    to: Endpoint,
    status: number,
    reason: string,
    toTag?: string,
  ): string {
    const text = serializeSip({
      startLine: `SIP/2.0 ${status} ${reason}`,
      headers: [
        ...headersNamed(request, 'Via'),
        ['From', header(request, 'From') ?? ''],
        [
          'To',
          toTag === undefined
            ? (header(request, 'To') ?? '')
            : withToTag(header(request, 'To') ?? '', toTag),
        ],
        ['Call-ID', header(request, 'Call-ID') ?? ''],
        ['CSeq', header(request, 'CSeq') ?? ''],
      ],
      body: '',
    });
    this.sendSip(text, to);
    return text;
  }

  private receiveSip(raw: string, info: RemoteInfo): void {
    if (raw.trim().length === 0) return;
    const message = parseSip(raw);
    const from = { address: info.address, port: info.port };
    if (message.startLine.startsWith('SIP/2.0')) {
      this.receiveResponse(raw, message, from);
      return;
    }
    const method = message.startLine.split(' ')[0] ?? '';
    if (method === 'CANCEL') this.receiveCancel(message, from);
    else if (method === 'ACK') this.receiveAck(raw, message, from);
    else if (tagOf(header(message, 'To') ?? '') !== undefined)
      this.receiveInDialog(raw, message, from);
    else this.receiveOutOfDialog(raw, message, method, from);
  }

  private receiveResponse(raw: string, message: SipText, from: Endpoint): void {
    const branch = branchOf(message);
    const transaction = this.clientTransactions.get(branch);
    if (transaction === undefined) return;
    if (Number(message.startLine.split(' ')[1]) >= 200) this.clientTransactions.delete(branch);
    this.relayToClient(transaction.client, raw, from, transaction.id, transaction.dialogId);
  }

  private receiveOutOfDialog(raw: string, message: SipText, method: string, from: Endpoint): void {
    const branch = branchKey(message, from);
    const previous = this.inviteByBranch.get(branch);
    if (method === 'INVITE' && previous !== undefined) {
      // A retransmission: the last response again, the request is not handed over twice.
      const last = this.lastResponseByBranch.get(branch);
      if (last !== undefined) this.sendSip(last, from);
      return;
    }
    const client = this.clientFor(method.toLowerCase());
    if (client === undefined) {
      // drachtio-server: "No connected clients found to handle incoming <method> request".
      this.answer(message, from, 503, 'Service Unavailable');
      return;
    }
    const transaction: ServerTransaction = {
      id: randomUUID(),
      request: message,
      source: from,
      toTag: randomUUID().slice(0, 10),
      dialogId: undefined,
    };
    this.transactions.set(transaction.id, transaction);
    if (method === 'INVITE') {
      this.inviteByBranch.set(branch, transaction);
      this.lastResponseByBranch.set(branch, this.answer(message, from, 100, 'Trying'));
    }
    this.record.relayedRequests.push(`${method} ${header(message, 'Call-ID') ?? ''}`);
    this.relayToClient(client, raw, from, transaction.id, '');
  }

  /** The server answers the CANCEL and the INVITE itself, then tells the client. */
  private receiveCancel(message: SipText, from: Endpoint): void {
    const branch = branchKey(message, from);
    const invite = this.inviteByBranch.get(branch);
    if (invite === undefined) {
      this.answer(message, from, 481, 'Call/Transaction Does Not Exist');
      return;
    }
    this.answer(message, from, 200, 'OK');
    if (!this.transactions.has(invite.id)) return;
    this.transactions.delete(invite.id);
    this.lastResponseByBranch.set(
      branch,
      this.answer(invite.request, invite.source, 487, 'Request Terminated', invite.toTag),
    );
    const client = this.clientFor('invite');
    if (client === undefined) return;
    this.record.relayedRequests.push(`CANCEL ${header(message, 'Call-ID') ?? ''}`);
    this.relayToClient(client, serializeSip(message), from, randomUUID(), '');
  }

  private receiveAck(raw: string, message: SipText, from: Endpoint): void {
    const dialog = this.dialogFor(message);
    if (dialog === undefined) return; // the ACK of a non-2xx final response: the server's own
    const invite = this.inviteByBranch.get(branchKey(message, from));
    const client = this.clientFor('invite');
    if (client === undefined) return;
    this.record.relayedRequests.push(`ACK ${dialog.callId}`);
    this.relayToClient(client, raw, from, invite?.id ?? randomUUID(), dialog.id);
  }

  private receiveInDialog(raw: string, message: SipText, from: Endpoint): void {
    const dialog = this.dialogFor(message);
    const method = message.startLine.split(' ')[0] ?? '';
    const client = this.clientFor('invite');
    if (dialog === undefined || client === undefined) {
      this.answer(message, from, 481, 'Call/Transaction Does Not Exist');
      return;
    }
    const transaction: ServerTransaction = {
      id: randomUUID(),
      request: message,
      source: from,
      toTag: tagOf(header(message, 'To') ?? '') ?? '',
      dialogId: dialog.id,
    };
    this.transactions.set(transaction.id, transaction);
    // drachtio-server clears the dialog when the BYE arrives, not when it is answered.
    if (method === 'BYE') this.dialogs.delete(dialog.id);
    this.record.relayedRequests.push(`${method} ${dialog.callId}`);
    this.relayToClient(client, raw, from, transaction.id, dialog.id);
  }

  private dialogFor(message: SipText): Dialog | undefined {
    const callId = header(message, 'Call-ID') ?? '';
    return this.dialogs.get(`${callId};from-tag=${tagOf(header(message, 'From') ?? '') ?? ''}`);
  }
}

// ---- SIP text, enough for the tests' messages ---------------------------------------------------

/** Headers the server writes itself on what it sends; a client's copies of them are dropped. */
const CORE_HEADERS = new Set([
  'via',
  'from',
  'to',
  'call-id',
  'cseq',
  'content-length',
  'max-forwards',
]);

function parseSip(raw: string): SipText {
  const split = raw.indexOf('\r\n\r\n');
  const head = split === -1 ? raw : raw.slice(0, split);
  const rest = split === -1 ? '' : raw.slice(split + 4);
  const [startLine = '', ...lines] = head.split(/\r?\n/);
  const headers = lines
    .filter((line) => line.includes(':'))
    .map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).trim(), line.slice(colon + 1).trim()] as const;
    });
  const length = Number(
    headers.find(([name]) => /^(content-length|l)$/i.test(name))?.[1] ?? rest.length,
  );
  return {
    startLine: startLine.trim(),
    headers,
    body: Buffer.from(rest).subarray(0, length).toString(),
  };
}

function serializeSip(message: SipText): string {
  const lines = message.headers
    .filter(([name]) => !/^content-length$/i.test(name))
    .map(([name, value]) => `${canonicalName(name)}: ${value}`);
  return [
    message.startLine,
    ...lines,
    `Content-Length: ${Buffer.byteLength(message.body)}`,
    '',
    message.body,
  ].join(CRLF);
}

const SPECIAL_NAMES: Record<string, string> = {
  'call-id': 'Call-ID',
  cseq: 'CSeq',
  'www-authenticate': 'WWW-Authenticate',
};

/** srf lowercases the names it is given; sofia writes them in their canonical form. */
function canonicalName(name: string): string {
  const lower = name.toLowerCase();
  return (
    SPECIAL_NAMES[lower] ??
    lower.replace(
      /(^|-)([a-z])/g,
      (_m, dash: string, letter: string) => dash + letter.toUpperCase(),
    )
  );
}

const COMPACT: Record<string, string> = {
  via: 'v',
  from: 'f',
  to: 't',
  'call-id': 'i',
  contact: 'm',
};

function headersNamed(message: SipText, name: string): (readonly [string, string])[] {
  const wanted = name.toLowerCase();
  return message.headers.filter(
    ([n]) => n.toLowerCase() === wanted || n.toLowerCase() === COMPACT[wanted],
  );
}

function header(message: SipText, name: string): string | undefined {
  return headersNamed(message, name)[0]?.[1];
}

function branchOf(message: SipText): string {
  return /branch=([^;,\s]+)/i.exec(header(message, 'Via') ?? '')?.[1] ?? '';
}

/** Branches are unique per sender only (two sipp runs reuse theirs): keyed by the source too. */
function branchKey(message: SipText, from: Endpoint): string {
  return `${from.address}:${from.port} ${branchOf(message)}`;
}

function tagOf(value: string): string | undefined {
  return /;\s*tag=([^;>\s]+)/i.exec(value)?.[1];
}

function withToTag(to: string, tag: string): string {
  return tagOf(to) === undefined ? `${to};tag=${tag}` : to;
}

function cseqMethod(message: SipText): string {
  return (header(message, 'CSeq') ?? '').split(/\s+/)[1]?.toUpperCase() ?? '';
}

function requestUri(message: SipText): string {
  return message.startLine.split(' ')[1] ?? '';
}

function uriOf(nameAddr: string): string | undefined {
  return /<([^>]+)>/.exec(nameAddr)?.[1] ?? nameAddr.split(';')[0];
}

function clock(): string {
  return new Date().toISOString().slice(11, 23);
}
