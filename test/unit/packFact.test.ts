import { describe, expect, it } from 'vitest';

import { checkVectors, packFact, unpackFact } from '../../shared/memory/vectors';

/**
 * A fact's plaintext is packed into one buffer of its final size, from vectors that may be views
 * onto decoded base64: what is unpacked is exactly what was sent, in order, whatever the path.
 */

function base64(values: readonly number[]): string {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => bytes.writeFloatLE(v, i * 4));
  return bytes.toString('base64');
}

describe('packFact', () => {
  it('unpacks the JSON and every vector, from arrays and from base64, with paths of any script', () => {
    const json = Buffer.from(JSON.stringify({ text: 'thé', n: 1 }));
    const vectors = checkVectors({
      text: base64([1.5, -0, 3.25]),
      'données.0': [0.1, 0.2, 0.3],
      $: base64([-1, 2, -3]),
    });
    const unpacked = unpackFact(packFact(json, vectors));
    expect(unpacked?.json.toString()).toBe(json.toString());
    expect([...(unpacked?.vectors.keys() ?? [])]).toEqual(['text', 'données.0', '$']);
    expect(Array.from(unpacked?.vectors.get('text') ?? [])).toEqual([1.5, -0, 3.25]);
    expect(Object.is(unpacked?.vectors.get('text')?.[1], -0)).toBe(true);
    expect(Array.from(unpacked?.vectors.get('données.0') ?? [])).toEqual(
      Array.from(new Float32Array([0.1, 0.2, 0.3])),
    );
    expect(Array.from(unpacked?.vectors.get('$') ?? [])).toEqual([-1, 2, -3]);
  });

  it('leaves a fact without vectors as its JSON', () => {
    const json = Buffer.from('{"a":1}');
    expect(packFact(json, new Map())).toBe(json);
  });

  it('refuses base64 of a float32 that is not finite', () => {
    const bytes = Buffer.alloc(8);
    bytes.writeFloatLE(1, 0);
    bytes.writeFloatLE(Infinity, 4);
    expect(() => checkVectors({ text: bytes.toString('base64') })).toThrow(/finite/);
  });
});
