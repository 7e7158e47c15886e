import pkg from '../package.json' with { type: 'json' };

export const VERSION: string = pkg.version;

// @NOTE: build.mjs replaces this name with the commit the bundle was built from (esbuild
// `define`); from source (tsx) it is not defined.
declare const EDGE_GIT_COMMIT: string | undefined;

/** The git commit of the build, or `source` when running from the TypeScript sources. */
export const COMMIT: string = typeof EDGE_GIT_COMMIT === 'string' ? EDGE_GIT_COMMIT : 'source';

/** What `--version` prints: the version, the Node it runs on and the commit. */
export function versionLine(): string {
  return `edge-gateway ${VERSION} (node ${process.version}, commit ${COMMIT})`;
}
