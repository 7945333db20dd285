// @runlane/conformance-backend: serve any JavaScript or TypeScript Runlane storage driver to
// runlane-certify over the driver backend protocol, with the contract's codecs and errors.

export * from './codec.mjs';
export * from './errors.mjs';
export { PROTOCOL_VERSIONS, errorFromWire, errorToWire, profileToWire, serve } from './serve.mjs';
