/**
 * Reads a `response.output_audio.delta` frame straight from its bytes. Audio deltas are most of
 * what a realtime session receives; decoding each frame to a string, parsing it into an object and
 * copying the base64 into a second string cost a few KB of garbage per delta, and at hundreds of
 * calls that garbage drives the scavenges that stall every call on the event loop.
 *
 * Pure and conservative: it accepts only a frame that is, byte for byte, valid JSON of the shape
 * the provider sends (a flat object whose values are plain strings or numbers, keys in any order,
 * whitespace anywhere JSON allows it) with a string `type` equal to the audio delta's, string
 * `response_id` and `item_id`, and a canonical base64 `delta`. For any other frame it returns
 * undefined and the caller parses the frame in full, so every other event, and every frame this
 * reader does not understand (escapes, non-ASCII text, nested values, bad JSON), gets the full
 * parse, validation and error reporting.
 */

/** What the session needs of an audio delta. */
export interface AudioDeltaFields {
  responseId: string;
  itemId: string;
  audio: Buffer;
}

import { decodeBase64 } from './base64-bytes.ts';

const AUDIO_DELTA_TYPE = 'response.output_audio.delta';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;

/** The key a string value is stored under, or None for a key the reader ignores. */
const enum Field {
  None,
  Type,
  ResponseId,
  ItemId,
  Delta,
}

const FIELD_KEYS: readonly (readonly [Field, Buffer])[] = [
  [Field.Type, Buffer.from('type', 'latin1')],
  [Field.ResponseId, Buffer.from('response_id', 'latin1')],
  [Field.ItemId, Buffer.from('item_id', 'latin1')],
  [Field.Delta, Buffer.from('delta', 'latin1')],
];
const TYPE_BYTES = Buffer.from(AUDIO_DELTA_TYPE, 'latin1');

function isWhitespace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

function isDigit(byte: number): boolean {
  return byte >= DIGIT_0 && byte <= DIGIT_9;
}

/**
 * One reader per session: it keeps the last response and item ids so that the strings of a long
 * run of deltas for the same item are made once, not once per delta.
 */
export class AudioDeltaReader {
  private lastResponseId = '';
  private lastItemId = '';
  // Byte ranges of the string values of the frame being read (start inclusive, end exclusive).
  private typeStart = -1;
  private typeEnd = -1;
  private responseIdStart = -1;
  private responseIdEnd = -1;
  private itemIdStart = -1;
  private itemIdEnd = -1;
  private deltaStart = -1;
  private deltaEnd = -1;

  /** The delta's fields, or undefined when the frame needs the full parse. */
  read(frame: Buffer): AudioDeltaFields | undefined {
    if (!this.scan(frame)) return undefined;
    if (!rangeEquals(frame, this.typeStart, this.typeEnd, TYPE_BYTES)) return undefined;
    if (this.responseIdStart < 0 || this.itemIdStart < 0 || this.deltaStart < 0) return undefined;
    const audio = decodeBase64(frame, this.deltaStart, this.deltaEnd);
    if (audio === undefined) return undefined;
    if (!rangeEqualsText(frame, this.responseIdStart, this.responseIdEnd, this.lastResponseId)) {
      this.lastResponseId = frame.toString('latin1', this.responseIdStart, this.responseIdEnd);
    }
    if (!rangeEqualsText(frame, this.itemIdStart, this.itemIdEnd, this.lastItemId)) {
      this.lastItemId = frame.toString('latin1', this.itemIdStart, this.itemIdEnd);
    }
    return { responseId: this.lastResponseId, itemId: this.lastItemId, audio };
  }

  /**
   * Walks the frame as one flat JSON object, recording where the string values of the fields it
   * knows are. False as soon as the frame leaves the accepted subset (or is not JSON at all).
   */
  private scan(frame: Buffer): boolean {
    this.typeStart = this.responseIdStart = this.itemIdStart = this.deltaStart = -1;
    const end = frame.length;
    let at = skipWhitespace(frame, 0);
    if (frame[at] !== OPEN_BRACE) return false;
    at = skipWhitespace(frame, at + 1);
    if (frame[at] === CLOSE_BRACE) return skipWhitespace(frame, at + 1) === end;
    for (;;) {
      if (frame[at] !== QUOTE) return false;
      const keyStart = at + 1;
      const keyEnd = plainStringEnd(frame, keyStart);
      if (keyEnd < 0) return false;
      const field = fieldOf(frame, keyStart, keyEnd);
      // One delta only: its value's end is found by the next quote and checked when decoded, so a
      // second one (whose value would never be checked) is left to the full parse.
      if (field === Field.Delta && this.deltaStart >= 0) return false;
      at = skipWhitespace(frame, keyEnd + 1);
      if (frame[at] !== COLON) return false;
      at = skipWhitespace(frame, at + 1);
      if (frame[at] === QUOTE) {
        const valueStart = at + 1;
        // The delta is checked byte by byte when it is decoded; other strings here.
        const valueEnd =
          field === Field.Delta
            ? frame.indexOf(QUOTE, valueStart)
            : plainStringEnd(frame, valueStart);
        if (valueEnd < 0) return false;
        this.store(field, valueStart, valueEnd);
        // Any other event type: no need to read further.
        if (field === Field.Type && !rangeEquals(frame, valueStart, valueEnd, TYPE_BYTES))
          return false;
        at = valueEnd + 1;
      } else {
        // Only numbers besides strings; a field the reader needs must not be a number.
        if (field !== Field.None) return false;
        at = numberEnd(frame, at);
        if (at < 0) return false;
      }
      at = skipWhitespace(frame, at);
      if (frame[at] === COMMA) {
        at = skipWhitespace(frame, at + 1);
        continue;
      }
      if (frame[at] !== CLOSE_BRACE) return false;
      return skipWhitespace(frame, at + 1) === end;
    }
  }

  private store(field: Field, start: number, end: number): void {
    // A repeated key keeps its last value, as JSON.parse does.
    switch (field) {
      case Field.Type:
        this.typeStart = start;
        this.typeEnd = end;
        return;
      case Field.ResponseId:
        this.responseIdStart = start;
        this.responseIdEnd = end;
        return;
      case Field.ItemId:
        this.itemIdStart = start;
        this.itemIdEnd = end;
        return;
      case Field.Delta:
        this.deltaStart = start;
        this.deltaEnd = end;
        return;
      case Field.None:
        return;
    }
  }
}

function skipWhitespace(frame: Buffer, at: number): number {
  while (at < frame.length && isWhitespace(frame[at] ?? 0)) at++;
  return at;
}

/**
 * The index of the quote closing a string that starts at `start`, or -1 when the string is not
 * plain: an escape (its text differs from its bytes), a control character (invalid JSON) or a
 * non-ASCII byte (its text needs UTF-8 decoding) sends the frame to the full parse.
 */
function plainStringEnd(frame: Buffer, start: number): number {
  for (let at = start; at < frame.length; at++) {
    const byte = frame[at] ?? 0;
    if (byte === QUOTE) return at;
    if (byte === BACKSLASH || byte < 0x20 || byte >= 0x80) return -1;
  }
  return -1;
}

/** The index after a JSON number starting at `start` (RFC 8259 §6), or -1 if there is none. */
function numberEnd(frame: Buffer, start: number): number {
  let at = start;
  if (frame[at] === MINUS) at++;
  if (frame[at] === DIGIT_0) {
    at++;
  } else if (isDigit(frame[at] ?? 0)) {
    while (isDigit(frame[at] ?? 0)) at++;
  } else {
    return -1;
  }
  if (frame[at] === DOT) {
    at++;
    if (!isDigit(frame[at] ?? 0)) return -1;
    while (isDigit(frame[at] ?? 0)) at++;
  }
  if (frame[at] === 0x65 || frame[at] === 0x45) {
    at++;
    if (frame[at] === PLUS || frame[at] === MINUS) at++;
    if (!isDigit(frame[at] ?? 0)) return -1;
    while (isDigit(frame[at] ?? 0)) at++;
  }
  return at;
}

function fieldOf(frame: Buffer, start: number, end: number): Field {
  for (const [field, key] of FIELD_KEYS) {
    if (rangeEquals(frame, start, end, key)) return field;
  }
  return Field.None;
}

function rangeEquals(frame: Buffer, start: number, end: number, expected: Buffer): boolean {
  if (start < 0 || end - start !== expected.length) return false;
  for (let i = 0; i < expected.length; i++) {
    if (frame[start + i] !== expected[i]) return false;
  }
  return true;
}

/** Compares plain ASCII bytes with a string already made from such bytes. */
function rangeEqualsText(frame: Buffer, start: number, end: number, text: string): boolean {
  if (end - start !== text.length) return false;
  for (let i = 0; i < text.length; i++) {
    if (frame[start + i] !== text.charCodeAt(i)) return false;
  }
  return true;
}
