/**
 * IPv6 addresses as text, the way inet_ntop (and so Node's RemoteInfo) writes them. Pure.
 */

/** An IPv6 address as inet_ntop writes it (RFC 5952), the form Node gives in RemoteInfo. */
export function formatIpv6(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2)
    groups.push(((bytes[i] as number) << 8) | (bytes[i + 1] as number));
  const dotted = `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  // IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) keep a dotted tail.
  if (groups.slice(0, 5).every((g) => g === 0)) {
    if (groups[5] === 0xffff) return `::ffff:${dotted}`;
    if (groups[5] === 0 && groups[6] !== 0) return `::${dotted}`;
  }
  // The longest run of two or more zero groups (the first of equal runs) becomes "::".
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}
