/** Command-line options of the benchmarks: `--name value`. */

/** The value after `--name`, or `fallback` when the option is not given. */
export function argument(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback;
}
