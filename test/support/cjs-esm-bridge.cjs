/**
 * Jest transform for CommonJS packages that require() the ESM-only Nest packages (today only
 * @nestjs/throttler). Node 20.19+ loads such a require() natively, but Jest's own module runtime
 * cannot before Node 24.9, so the service test layer (which builds the real module graph) could not
 * load the rate-limit module. The transform points those require() calls at the ESM instances the
 * spec already imported (test/support/esm-bridge.setup.ts), so there is still one @nestjs/common.
 */
const BRIDGED = ['@nestjs/common', '@nestjs/core'];
module.exports = {
  process(source) {
    let code = source;
    for (const name of BRIDGED) {
      code = code.split(`require("${name}")`).join(`globalThis.__esmBridge[${JSON.stringify(name)}]`);
    }
    return { code };
  },
};
