import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { AppError, type ErrorDetail } from '../common/errors.js';
import type { Principal } from '../common/request.js';
import { constraintRule, pgErrorOf } from '../database/constraints.js';
import type { Transactions, Tx } from '../database/transactions.js';
import { UpdateContactDto } from '../contacts/contact.dto.js';
import type { ContactsService } from '../contacts/contacts.service.js';
import type { DailyCount, TrackingRepository } from './tracking.repository.js';
import { contactTraits, type TraitValues, type TrackedCall } from './tracking.rules.js';

/** Who a call is attributed to, and what of its identity work was refused (reported on the stored call). */
export interface Attribution {
  contactId: number | null;
  problems: ErrorDetail[];
}

const MAX_TRAIT_PASSES = 4;

/**
 * The identity rules of the intake (README "Tracked events", identity), run in the intake's
 * transaction after the identity keys of the whole request are locked:
 *
 * - a userId names the contact whose externalId it is; `identify` with a userId that names none
 *   takes the contact holding `traits.email` (and sets its externalId), else creates one; `track`
 *   with an unknown userId creates one (named by the userId until an identify names it);
 * - a call with an anonymousId and a contact links that anonymousId to the contact, and the
 *   anonymous events stored before are attributed to it; a link is never replaced: an anonymousId
 *   or an email that belongs to another contact is reported, never merged;
 * - identify applies the reserved traits and custom field aliases as an ordinary contact write
 *   (ContactsService: validation, contact.updated / contact.created events); a trait that fails
 *   validation is left out and reported, the others are applied.
 */
export class TrackingIdentity {
  /** Track events attributed by anonymousId links made in this request (for the daily counts and the consumers' queues). */
  readonly attributed: (DailyCount & { eventId: string })[] = [];
  private readonly byUserId = new Map<string, number>();
  private readonly byAnonymousId = new Map<string, number>();
  private aliases: Set<string> | null = null;

  constructor(
    private readonly contacts: ContactsService,
    private readonly repo: TrackingRepository,
    private readonly transactions: Transactions,
    private readonly who: Principal,
    private readonly now: Date,
    private readonly tx: Tx,
  ) {}

  /** Locks every identity key of the calls and reads the known links; then attributes each call in order. */
  async resolve(calls: TrackedCall[]): Promise<Attribution[]> {
    const userIds = [...new Set(calls.map((c) => c.userId).filter((v): v is string => v !== null))];
    const anonymousIds = [...new Set(calls.map((c) => c.anonymousId).filter((v): v is string => v !== null))];
    const emails = calls.filter((c) => c.type === 'identify' && typeof c.traits.email === 'string').map((c) => (c.traits.email as string).trim().toLowerCase());
    await this.repo.lockIdentities([...userIds.map((u) => `u:${u}`), ...anonymousIds.map((a) => `a:${a}`), ...emails.map((e) => `e:${e}`)], this.tx);
    for (const [k, v] of await this.contacts.idsByExternalIds(userIds, this.tx)) this.byUserId.set(k, v);
    for (const [k, v] of await this.repo.anonymousLinks(anonymousIds, this.tx)) this.byAnonymousId.set(k, v);
    const out: Attribution[] = [];
    for (const call of calls) out.push(call.type === 'identify' ? await this.identify(call) : await this.track(call));
    return out;
  }

  private async track(call: TrackedCall): Promise<Attribution> {
    const problems: ErrorDetail[] = [];
    let contactId: number | null = null;
    if (call.userId !== null) contactId = this.byUserId.get(call.userId) ?? (await this.create(call.userId, {}, {}, problems));
    else if (call.anonymousId !== null) contactId = this.byAnonymousId.get(call.anonymousId) ?? null;
    if (contactId !== null && call.userId !== null && call.anonymousId !== null) await this.link(call.anonymousId, contactId, problems);
    return { contactId, problems };
  }

  private async identify(call: TrackedCall): Promise<Attribution> {
    const problems: ErrorDetail[] = [];
    this.aliases ??= await this.contacts.customFieldAliases(this.tx);
    const { values, fields } = contactTraits(call.traits, this.aliases);
    let contactId = call.userId !== null ? (this.byUserId.get(call.userId) ?? null) : null;
    if (contactId === null && call.userId === null && call.anonymousId !== null) contactId = this.byAnonymousId.get(call.anonymousId) ?? null;
    if (contactId === null && typeof values.email === 'string') {
      const holder = (await this.contacts.idsByEmails([values.email.trim().toLowerCase()], this.tx)).values().next().value;
      if (holder !== undefined) {
        const record = await this.contacts.lockRecord(holder, this.tx);
        if (record && call.userId !== null && record.externalId !== null && record.externalId !== call.userId) {
          // The email belongs to a contact known by another userId: two contacts are never merged.
          problems.push({ field: 'traits.email', message: `belongs to contact ${holder}, which has another userId; not applied (contacts are never merged)` });
          delete values.email;
        } else if (record) {
          contactId = holder;
          if (call.userId !== null && record.externalId === null) await this.write(holder, { externalId: call.userId }, {}, problems);
        }
      }
    }
    if (contactId === null && (call.userId !== null || typeof values.email === 'string')) {
      contactId = await this.create(call.userId, values, fields, problems);
      if (contactId === null) return { contactId, problems };
    } else if (contactId !== null) {
      await this.write(contactId, values, fields, problems);
    }
    if (contactId !== null && call.userId !== null) this.byUserId.set(call.userId, contactId);
    if (contactId !== null && call.anonymousId !== null) await this.link(call.anonymousId, contactId, problems);
    return { contactId, problems };
  }

  /** Links an anonymousId to the contact (never replacing an earlier link) and attributes its anonymous events. */
  private async link(anonymousId: string, contactId: number, problems: ErrorDetail[]): Promise<void> {
    const known = this.byAnonymousId.get(anonymousId);
    if (known === contactId) return;
    const linked = known ?? (await this.repo.linkAnonymous(anonymousId, contactId, this.now, this.tx));
    this.byAnonymousId.set(anonymousId, linked);
    if (linked !== contactId) {
      problems.push({
        field: 'anonymousId',
        message: `is linked to contact ${linked} already; not linked to contact ${contactId} (contacts are never merged)`,
      });
      return;
    }
    for (const e of await this.repo.attributeAnonymous(anonymousId, contactId, this.tx))
      this.attributed.push({ contactId, name: e.name, at: e.at, eventId: e.id });
  }

  /**
   * Creates a contact for a userId (or an email alone): named by the name trait, else by the
   * userId or the email. Traits that fail validation are left out and reported. Null (reported)
   * when no contact can be created.
   */
  private async create(userId: string | null, values: TraitValues, fields: Record<string, unknown>, problems: ErrorDetail[]): Promise<number | null> {
    const body = await this.validTraits(values, problems);
    let custom = fields;
    for (let pass = 0; pass < MAX_TRAIT_PASSES; pass++) {
      const dto = {
        ...body,
        name: typeof body.name === 'string' && body.name.trim() ? body.name : (userId ?? (body.email as string)),
        ...(userId !== null ? { externalId: userId } : {}),
        ...(Object.keys(custom).length ? { fields: custom } : {}),
      } as UpdateContactDto;
      try {
        // In a savepoint: a refused write (a unique value taken) leaves the intake's transaction usable.
        const created = await this.transactions.run((sp) => this.contacts.create(dto as Parameters<ContactsService['create']>[0], this.who, sp), this.tx);
        if (userId !== null) this.byUserId.set(userId, created.id);
        return created.id;
      } catch (e) {
        const refused = this.refusedFields(e);
        if (!refused?.length) throw e;
        problems.push(...refused.map((r) => ({ field: `traits.${r.field}`, message: r.message })));
        const names = new Set(refused.map((r) => r.field));
        for (const n of names) delete body[n];
        custom = Object.fromEntries(Object.entries(custom).filter(([k]) => !names.has(`fields.${k}`)));
        if (names.has('externalId') || names.has('name')) return null;
      }
    }
    return null;
  }

  /** An ordinary contact write of the valid traits (PATCH semantics); refused ones are reported and the rest applied. */
  private async write(
    contactId: number,
    values: TraitValues | { externalId: string },
    fields: Record<string, unknown>,
    problems: ErrorDetail[],
  ): Promise<void> {
    const body = await this.validTraits(values, problems);
    let custom = fields;
    for (let pass = 0; pass < MAX_TRAIT_PASSES; pass++) {
      const dto = { ...body, ...(Object.keys(custom).length ? { fields: custom } : {}) } as UpdateContactDto;
      if (!Object.keys(dto).length) return;
      try {
        await this.transactions.run((sp) => this.contacts.patch(contactId, dto, this.who, sp), this.tx);
        return;
      } catch (e) {
        const refused = this.refusedFields(e);
        if (!refused?.length) throw e;
        problems.push(...refused.map((r) => ({ field: `traits.${r.field}`, message: r.message })));
        const names = new Set(refused.map((r) => r.field));
        for (const n of names) delete body[n];
        custom = Object.fromEntries(Object.entries(custom).filter(([k]) => !names.has(`fields.${k}`)));
      }
    }
  }

  /** The traits that pass the contact DTO's validation, each checked alone; the others reported. */
  private async validTraits(values: object, problems: ErrorDetail[]): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) continue;
      const errors = await validate(plainToInstance(UpdateContactDto, { [k]: v as unknown }), { forbidUnknownValues: false });
      const mine = errors.find((e) => e.property === k);
      const messages: string[] = Object.values(mine?.constraints ?? { invalid: 'is not valid' });
      if (mine) problems.push({ field: `traits.${k}`, message: messages[0] });
      else out[k] = typeof v === 'string' ? v.trim() : v;
    }
    return out;
  }

  /** The fields a contact write refused (validation, or a unique value another contact holds); null for another failure. */
  private refusedFields(e: unknown): { field: string; message: string }[] | null {
    if (e instanceof AppError && (e.code === 'validation_failed' || e.code === 'conflict')) {
      return (e.details ?? []).map((d) => ({ field: d.field ?? 'traits', message: d.message }));
    }
    const rule = constraintRule(pgErrorOf(e)?.constraint);
    if (rule && 'field' in rule) return [{ field: rule.field, message: rule.kind === 'unique' ? 'is already taken by another contact' : 'is not valid' }];
    return null;
  }
}
