import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitUntil } from '../../test/support/wait.js';
import { startServiceContext, type ServiceContext } from '../../test/support/service-testing.js';
import type { Principal } from '../common/request.js';
import { ContactsService } from '../contacts/contacts.service.js';
import { BroadcastsService, type BroadcastRecord } from './broadcasts.service.js';
import { InboundMessagesService } from './inbound-messages.service.js';
import { signBody } from '../sms/signature.js';

const SECRET = 'svc-broadcast-secret';

describe('BroadcastsService and opt-out (service layer, real PostgreSQL, in-process jobs, fake SMS provider)', () => {
  let ctx: ServiceContext;
  let broadcasts: BroadcastsService;
  let contacts: ContactsService;
  let inbound: InboundMessagesService;
  let who: Principal;

  beforeAll(async () => {
    ctx = await startServiceContext({ SMS_WEBHOOK_SECRET: SECRET });
    broadcasts = ctx.get(BroadcastsService);
    contacts = ctx.get(ContactsService);
    inbound = ctx.get(InboundMessagesService);
    who = await ctx.principal();
  });
  afterAll(async () => {
    await ctx.close();
  });

  let n = 0;
  const contact = (phone: string | null, name = 'Ada', title?: string) => contacts.create({ name, email: `svc${++n}@broadcast.test`, phone, title }, who);
  const until = (id: number, status: string, ms = 15000): Promise<BroadcastRecord> =>
    waitUntil(
      `broadcast ${id} to be ${status}`,
      async () => {
        const b = await broadcasts.get(id);
        return b.status === status ? b : null;
      },
      ms,
      50,
    );

  it('renders per recipient, skips opted-out numbers, and hands each message to the provider once', async () => {
    const a = await contact('+14155557001', 'Ada');
    const b = await contact('+14155557002', 'Bo', 'CEO');
    const c = await contact('+14155557003', 'Cy');
    await contacts.setDoNotContact(c.id, { reason: 'manual' }, who);
    const created = await broadcasts.create(
      { content: 'Hi {{contact.name}}, {{contact.title | "friend"}}', audience: { contactIds: [a.id, b.id, c.id] } },
      who,
    );
    const sent = await broadcasts.send(created.id, who);
    expect(sent).toMatchObject({ status: 'sending', recipients: 2, skipped: { opted_out: 1 } });
    const done = await until(created.id, 'completed');
    expect(done.counts).toMatchObject({ sent: 2, queued: 0 });
    const mine = ctx.sms.sent.filter((s) => ['+14155557001', '+14155557002', '+14155557003'].includes(s.to));
    expect(mine.map((s) => [s.to, s.body]).sort()).toEqual([
      ['+14155557001', 'Hi Ada, friend'],
      ['+14155557002', 'Hi Bo, CEO'],
    ]);
    await expect(broadcasts.send(created.id, who)).rejects.toMatchObject({ status: 409 });
  });

  it('an inbound STOP and START change the entry of every contact with the number', async () => {
    const a = await contact('+14155557101');
    const b = await contact('(415) 555-7101');
    const body = Buffer.from(JSON.stringify({ from: '+1 415 555 7101', body: ' Stop ' }));
    const r = await inbound.receive(body, signBody(SECRET, body), JSON.parse(body.toString()));
    expect(r).toMatchObject({ accepted: true, action: 'opt_out', contactsUpdated: 2 });
    expect((await contacts.get(a.id)).doNotContact.sms?.reason).toBe('unsubscribed');
    expect((await contacts.optedOutPhones(['+14155557101'])).has('+14155557101')).toBe(true);
    const start = Buffer.from(JSON.stringify({ from: '+14155557101', body: 'unstop' }));
    expect((await inbound.receive(start, signBody(SECRET, start), JSON.parse(start.toString()))).contactsUpdated).toBe(2);
    expect((await contacts.get(b.id)).doNotContact.sms).toBeNull();
    await expect(inbound.receive(start, 'sha256=00', JSON.parse(start.toString()))).rejects.toMatchObject({ status: 401 });
  });

  it('cancels a draft; a canceled broadcast cannot be sent or canceled again', async () => {
    const a = await contact('+14155557201');
    const created = await broadcasts.create({ content: 'Never', audience: { contactIds: [a.id] } }, who);
    expect((await broadcasts.cancel(created.id, who)).status).toBe('canceled');
    await expect(broadcasts.send(created.id, who)).rejects.toMatchObject({ status: 409 });
    await expect(broadcasts.cancel(created.id, who)).rejects.toMatchObject({ status: 409 });
  });
});
