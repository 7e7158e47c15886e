/** Attribute types shared by the attribute domain, the event map and the transports. */

export type AttributeScope = 'CLIENT_SCOPE' | 'SHARED_SCOPE' | 'SERVER_SCOPE';

export const ATTRIBUTE_SCOPES: readonly AttributeScope[] = [
  'CLIENT_SCOPE',
  'SHARED_SCOPE',
  'SERVER_SCOPE',
];

/** ThingsBoard's key-value data types (reference device-api.md §1.2). */
export type KvType = 'BOOLEAN' | 'LONG' | 'DOUBLE' | 'STRING' | 'JSON';

/**
 * A typed value. LONG is a number when it is a safe integer and a bigint beyond 2^53; DOUBLE is
 * a number that prints with a fraction (`42.0`); JSON is the parsed object or array.
 */
export interface KvValue {
  readonly type: KvType;
  readonly value: unknown;
}

export interface AttributeKv {
  readonly key: string;
  readonly value: unknown;
  readonly lastUpdateTs: number;
}

/** What the store returns: an attribute with the type it was saved with. */
export interface TypedAttributeKv extends AttributeKv {
  readonly type: KvType;
}

/** A shared-attribute change as pushed to a subscribed device (reference §2.3). */
export type SharedAttributeUpdate =
  | { readonly kind: 'updated'; readonly values: readonly TypedAttributeKv[] }
  | { readonly kind: 'deleted'; readonly keys: readonly string[] };
