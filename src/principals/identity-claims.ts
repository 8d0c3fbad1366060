/**
 * What may name a subject or a group. Identities are compared as strings, so anything else (a number, an
 * object, an empty or blank string) would be coerced into a name another caller can share: every object
 * becomes "[object Object]", 42 becomes "42".
 */
export const MAX_IDENTITY_LENGTH = 1024;

export function isIdentityString(value: unknown): value is string {
  return typeof value === 'string' && value.trim() !== '' && value.length <= MAX_IDENTITY_LENGTH;
}

/**
 * A group or role claim: one name, or an array of names. Undefined when the claim is absent; null when it is
 * present but not made of identity strings (the token is then refused rather than read partly).
 */
export function groupNames(value: unknown): string[] | undefined | null {
  if (value === undefined) return undefined;
  if (isIdentityString(value)) return [value];
  if (Array.isArray(value) && value.every(isIdentityString)) return value;
  return null;
}
