/** See cjs-esm-bridge.cjs: the ESM Nest packages, for CommonJS packages that require() them under Jest. */
import * as common from '@nestjs/common';
import * as core from '@nestjs/core';

(globalThis as { __esmBridge?: Record<string, unknown> }).__esmBridge = { '@nestjs/common': common, '@nestjs/core': core };
