/** Values the global setup provides to every test file (see test/global-setup.ts). */
declare module 'vitest' {
  export interface ProvidedContext {
    redisUrl: string;
  }
}

export {};
