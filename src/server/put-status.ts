/**
 * The status of a PUT that creates or replaces (docs/decisions/envelopes-and-ids.md): 201 when the
 * id did not exist and a record was created, 200 when an existing record was replaced. A handler
 * carries `@CreateOrReplace()` and returns `putOutcome(created, body)`; the interceptor sets the
 * status and sends the body, so no controller touches the response object.
 */
import { applyDecorators, type CallHandler, type ExecutionContext, Injectable, type NestInterceptor, UseInterceptors } from '@nestjs/common';
import type { Response } from 'express';
import { map, type Observable } from 'rxjs';

/** What a create-or-replace handler answers: whether it created, and the response body. */
export class PutOutcome<T> {
  constructor(
    readonly created: boolean,
    readonly body: T,
  ) {}
}

export function putOutcome<T>(created: boolean, body: T): PutOutcome<T> {
  return new PutOutcome(created, body);
}

@Injectable()
export class PutStatusInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      map((out: unknown) => {
        if (!(out instanceof PutOutcome)) {
          // A wiring mistake, not a client error: the handler forgot putOutcome().
          throw new Error(`${context.getClass().name}.${context.getHandler().name} is @CreateOrReplace() but did not return putOutcome(created, body)`);
        }
        context
          .switchToHttp()
          .getResponse<Response>()
          .status(out.created ? 201 : 200);
        return out.body as unknown;
      }),
    );
  }
}

/** Marks a PUT handler that creates (201) or replaces (200); it returns `putOutcome(created, body)`. */
export function CreateOrReplace(): MethodDecorator & ClassDecorator {
  return applyDecorators(UseInterceptors(PutStatusInterceptor));
}
