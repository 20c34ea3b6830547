import { describe, expect, it } from 'vitest';

import { checkFactKey, checkNamespace as checkMemoryNamespace } from '../../shared/memory/facts';
import { InvalidArgumentError } from '../../shared/protocol/errors';
import { characterProblem, validateKey, validatePrefix } from '../../shared/protocol/keys';
import { checkNamespace as checkThreadNamespace, isPlainText } from '../../shared/threads/identifiers';

/** Every Unicode noncharacter: U+FDD0-U+FDEF and U+xxFFFE, U+xxFFFF in each of the 17 planes. */
const NONCHARACTERS = [
  ...Array.from({ length: 32 }, (_, i) => 0xfdd0 + i),
  ...Array.from({ length: 17 }, (_, plane) => [plane * 0x10000 + 0xfffe, plane * 0x10000 + 0xffff]).flat(),
].map((code) => String.fromCodePoint(code));

/** Neighbours of noncharacters, which are ordinary characters. */
const ALLOWED = [0xfdcf, 0xfdf0, 0xfffd, 0x1fffd, 0x10000, 0x10fffd, 0xe9, 0x4e2d, 0x1f600].map((code) =>
  String.fromCodePoint(code),
);

function fieldOf(action: () => void): string | undefined {
  try {
    action();
  } catch (error) {
    expect(error).toBeInstanceOf(InvalidArgumentError);
    return (error as InvalidArgumentError).field;
  }
  return undefined;
}

describe('the key grammar', () => {
  it('has 66 noncharacters, each refused in a key, a prefix and every user-chosen name', () => {
    expect(NONCHARACTERS).toHaveLength(66);
    for (const char of NONCHARACTERS) {
      const code = char.codePointAt(0)?.toString(16);
      expect(characterProblem(`a${char}b`), code).toMatch(/noncharacter/);
      expect(
        fieldOf(() => validateKey(`notes/a${char}`)),
        code,
      ).toBe('key');
      expect(
        fieldOf(() => validatePrefix(char)),
        code,
      ).toBe('prefix');
      expect(
        fieldOf(() => validatePrefix(`notes/${char}/`)),
        code,
      ).toBe('prefix');
      expect(
        fieldOf(() => checkMemoryNamespace(`users/${char}`)),
        code,
      ).toBe('namespace');
      expect(
        fieldOf(() => checkFactKey(`k${char}`)),
        code,
      ).toBe('key');
      expect(
        fieldOf(() => checkThreadNamespace(`ns${char}`)),
        code,
      ).toBe('ns');
      expect(isPlainText(`task${char}`, 256, false), code).toBe(false);
    }
  });

  it('accepts the characters next to the noncharacters', () => {
    for (const char of ALLOWED) {
      const code = char.codePointAt(0)?.toString(16);
      expect(characterProblem(char), code).toBeNull();
      expect(
        fieldOf(() => validateKey(`notes/${char}`)),
        code,
      ).toBeUndefined();
      expect(
        fieldOf(() => validatePrefix(`notes/${char}`)),
        code,
      ).toBeUndefined();
      expect(
        fieldOf(() => checkMemoryNamespace(`users/${char}`)),
        code,
      ).toBeUndefined();
      expect(
        fieldOf(() => checkFactKey(char)),
        code,
      ).toBeUndefined();
    }
  });

  it('refuses lone surrogates and control characters in keys and prefixes', () => {
    for (const text of ['\ud800', 'a\udfffb', '\u0000', '\u001f', '\u007f']) {
      expect(characterProblem(text), JSON.stringify(text)).not.toBeNull();
      expect(fieldOf(() => validateKey(`a${text}`))).toBe('key');
      expect(fieldOf(() => validatePrefix(text))).toBe('prefix');
    }
  });

  it('takes as a prefix the beginning of any valid key, and nothing else', () => {
    for (const prefix of [
      '',
      'notes',
      'notes/',
      'notes/to',
      'notes/.',
      'notes/..',
      'a/.hid',
      'x'.repeat(1024),
    ]) {
      expect(
        fieldOf(() => validatePrefix(prefix)),
        prefix,
      ).toBeUndefined();
    }
    for (const prefix of ['/', '/notes', 'a//', 'a//b', './', 'a/../', 'a/./b', 'a\\b', 'x'.repeat(1025)]) {
      expect(
        fieldOf(() => validatePrefix(prefix)),
        prefix,
      ).toBe('prefix');
    }
    expect(fieldOf(() => validatePrefix('a%', 'cursor'))).toBeUndefined();
    expect(fieldOf(() => validatePrefix('\u0000', 'from'))).toBe('from');
  });
});
