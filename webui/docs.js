// The pet store's API reference: Swagger UI on the served openapi.yaml. Its
// servers list only this server (/v1 of the page's origin), so "Try it out"
// calls the server that serves the page, with the key given under
// "Authorize". Nothing is fetched from anywhere else: no validator, no fonts.
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "/docs/openapi.yaml",
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    presets: [SwaggerUIBundle.presets.apis],
    deepLinking: true,
    validatorUrl: "none",
    queryConfigEnabled: false,
    displayRequestDuration: true,
    showExtensions: true,
    displayOperationId: true,
    tryItOutEnabled: false,
    persistAuthorization: false,
  });
});
