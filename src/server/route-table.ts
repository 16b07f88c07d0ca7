import { Injectable, RequestMethod } from '@nestjs/common';
import { PATH_METADATA, METHOD_METADATA } from '@nestjs/common/constants.js';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { type Credential, FALLBACK_ROUTE_KEY, routeAccessOf } from '../common/route-access.js';
import { LARGE_JSON_BODY_KEY } from './large-json-body.decorator.js';

export interface RouteInfo {
  method: string;
  path: string;
  permission: string;
  /** Permissions needed besides `permission` (a route that answers another resource's records needs its read permission). */
  alsoRequires: readonly string[];
  /** How the caller proves who it is (see Credential in route-access.ts). */
  credential: Credential;
  /** Regular expression matching concrete request paths (":id" segments match one segment). */
  pattern: RegExp;
  /** The controller class and its handler method (for metadata read by the OpenAPI document). */
  controller: Function;
  handlerName: string;
}

function join(...parts: string[]): string {
  const p = parts
    .flatMap((s) => s.split('/'))
    .filter(Boolean)
    .join('/');
  return '/' + p;
}

function toPattern(path: string): RegExp {
  const re = path
    .split('/')
    .map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.startsWith('*') ? '.+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${re}/?$`);
}

/**
 * The live route table, read once from Nest's controller metadata after the modules are built.
 * GET /api/endpoints, the OpenAPI permission notes, the 405 answers and the "closed by default"
 * check all read this one table, so they cannot drift from the code.
 */
@Injectable()
export class RouteTable {
  private routes: RouteInfo[] | null = null;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  all(): RouteInfo[] {
    if (!this.routes) this.routes = this.build();
    return this.routes;
  }

  methodsFor(path: string): string[] {
    const normalized = path.replace(/\/+$/, '') || '/';
    return [
      ...new Set(
        this.all()
          .filter((r) => r.pattern.test(normalized))
          .map((r) => r.method),
      ),
    ];
  }

  /**
   * Whether the route a request reaches takes a large JSON body (@LargeJsonBody()), by its method and
   * path: the body parsers ask before Nest's router runs. The routes are read once, when this is called.
   */
  largeJsonBodyRoutes(): (method: string, path: string) => boolean {
    const large = this.all().filter((r) => Reflect.getMetadata(LARGE_JSON_BODY_KEY, r.controller.prototype[r.handlerName]) === true);
    return (method, path) => large.some((r) => r.method === method && r.pattern.test(path));
  }

  private build(): RouteInfo[] {
    const out: RouteInfo[] = [];
    for (const wrapper of this.discovery.getControllers()) {
      const { instance, metatype } = wrapper;
      if (!instance || !metatype) continue;
      const ctrlPaths = ([] as string[]).concat(Reflect.getMetadata(PATH_METADATA, metatype) ?? '/');
      const proto = Object.getPrototypeOf(instance);
      for (const name of this.scanner.getAllMethodNames(proto)) {
        const handler = proto[name];
        const routePaths = Reflect.getMetadata(PATH_METADATA, handler);
        const method = Reflect.getMetadata(METHOD_METADATA, handler) as RequestMethod | undefined;
        if (routePaths === undefined || method === undefined) continue;
        if (Reflect.getMetadata(FALLBACK_ROUTE_KEY, metatype)) continue;
        const { credential, permission, alsoRequires } = routeAccessOf(handler, metatype);
        if (!permission) {
          throw new Error(`Route ${metatype.name}.${name} declares neither @RequirePermission() nor @Public()`);
        }
        for (const c of ctrlPaths) {
          for (const r of ([] as string[]).concat(routePaths)) {
            // Shown without path-to-regexp escapes and optional-group braces (`:id\:{:alias}` → `:id::alias`).
            const path = join(c, r).replace(/\\(.)/g, '$1').replace(/[{}]/g, '');
            out.push({
              method: RequestMethod[method],
              path,
              permission,
              alsoRequires,
              credential,
              pattern: toPattern(path),
              controller: metatype,
              handlerName: name,
            });
          }
        }
      }
    }
    out.sort((a, b) => a.path.localeCompare(b.path) || a.method.localeCompare(b.method));
    return out;
  }
}
