/**
 * Text from outside (a receiver's or a gateway's answer) as PostgreSQL can store it: `text` refuses
 * the NUL character, and `jsonb` also refuses a UTF-16 surrogate without its pair (which JSON.stringify
 * writes as a `\ud800` escape). Each becomes U+FFFD, the replacement character that decoding bytes
 * which are not valid UTF-8 already gives (Buffer#toString('utf8')); everything else is kept.
 */
// eslint-disable-next-line no-control-regex -- NUL is one of the characters this expression exists to replace
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

export function storableText(s: string): string {
  return s.replace(UNSTORABLE, '\ufffd');
}

/** Bytes from outside as storable text: UTF-8 decoded (invalid sequences become U+FFFD), then {@link storableText}. */
export function storableTextOf(bytes: Buffer): string {
  return storableText(bytes.toString('utf8'));
}
