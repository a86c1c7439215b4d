// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

/**
 * Returns the paths of the objects in a JSON text that name a member twice:
 * "" for the top-level value, "/keys/2" for the third element of its "keys"
 * list, and so on. JSON.parse keeps the last of two members silently; the
 * Go SDK's JOSE library refuses a token's header or claims, or a key, that
 * repeats a member, and the verifier does the same with these paths. The
 * text must be JSON that JSON.parse accepted.
 * @internal
 */
export function objectsWithDuplicateMembers(text: string): Set<string> {
  const s = new Scanner(text);
  s.ws();
  s.value("", undefined);
  return s.found;
}

/**
 * One pass over a JSON text. It runs on every token's header and claims, so
 * it reads character codes, takes a name without escapes as it stands, and
 * builds a path only for a value that is an object or a list, the only
 * values a path can name.
 */
class Scanner {
  readonly found = new Set<string>();
  private i = 0;
  private readonly end: number;

  constructor(private readonly text: string) {
    this.end = text.length;
  }

  ws(): void {
    const t = this.text;
    let i = this.i;
    for (; i < this.end; i++) {
      const c = t.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    }
    this.i = i;
  }

  /**
   * The value at the current position, after white space: a member named
   * name of the object at path, or when name is undefined, the value at
   * path itself.
   */
  value(path: string, name: string | number | undefined): void {
    const c = this.text.charCodeAt(this.i);
    if (c === 0x7b || c === 0x5b) {
      const at = name === undefined ? path : `${path}/${escapePointer(name)}`;
      if (c === 0x7b) this.object(at);
      else this.list(at);
    } else if (c === 0x22) {
      this.str();
    } else {
      this.scalar();
    }
  }

  /** The string whose opening quote is at the current position; returns its value. */
  private str(): string {
    const t = this.text;
    const start = this.i;
    let escaped = false;
    let i = start + 1;
    for (; i < this.end; i++) {
      const c = t.charCodeAt(i);
      if (c === 0x22) break;
      if (c === 0x5c) {
        escaped = true;
        i++;
      }
    }
    this.i = i + 1;
    return escaped ? (JSON.parse(t.slice(start, i + 1)) as string) : t.slice(start + 1, i);
  }

  /** A number, true, false or null: up to the next , ] } or white space. */
  private scalar(): void {
    const t = this.text;
    let i = this.i;
    for (; i < this.end; i++) {
      const c = t.charCodeAt(i);
      if (
        c === 0x2c ||
        c === 0x5d ||
        c === 0x7d ||
        c === 0x20 ||
        c === 0x09 ||
        c === 0x0a ||
        c === 0x0d
      ) {
        break;
      }
    }
    this.i = i;
  }

  private object(path: string): void {
    this.i++; // {
    this.ws();
    if (this.text.charCodeAt(this.i) === 0x7d) {
      this.i++;
      return;
    }
    const seen = new Set<string>();
    for (;;) {
      this.ws();
      const key = this.str();
      if (seen.has(key)) this.found.add(path);
      seen.add(key);
      this.ws();
      this.i++; // the colon
      this.ws();
      this.value(path, key);
      this.ws();
      if (this.text.charCodeAt(this.i++) === 0x7d) return;
    }
  }

  private list(path: string): void {
    this.i++; // [
    this.ws();
    if (this.text.charCodeAt(this.i) === 0x5d) {
      this.i++;
      return;
    }
    for (let n = 0; ; n++) {
      this.ws();
      this.value(path, n);
      this.ws();
      if (this.text.charCodeAt(this.i++) === 0x5d) return;
    }
  }
}

/** A member name or index as one segment of a JSON pointer. */
function escapePointer(name: string | number): string {
  return typeof name === "number" ? String(name) : name.replace(/~/g, "~0").replace(/\//g, "~1");
}
